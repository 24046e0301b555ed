"""Builds corpus.json, the held-out credentials of benchmarks/bench_secrets.py, from gitleaks' rule files.

Run once by hand, with gitleaks' source unpacked (its `cmd/generate/config/rules/*.go`):

    python benchmarks/secrets_corpus/build_corpus.py PATH/TO/gitleaks/cmd/generate/config/rules

Each gitleaks rule validates itself on true-positive and false-positive samples written in Go: literal
strings, and strings generated from a pattern (`secrets.NewSecret(regex)`) put into some thirty config and
source-code lines (`utils.GenerateSampleSecrets`). This reads those Go expressions (a small evaluator of
the few forms the files use; a sample it cannot read is skipped and counted), generates the random parts
with a fixed seed, and puts each sample inside a sentence of an agent's answer. SOURCE.md says where the
material comes from and under which licence.
"""

import json
import random
import re
import re._parser as sre_parse  # type: ignore[import-not-found]
import sys
from pathlib import Path

rng = random.Random(47)

# Go's `utils` helpers: character classes of a size.
PATTERN_HELPERS = {
    "utils.Numeric": "[0-9]{%s}", "utils.Hex": "[a-f0-9]{%s}", "utils.AlphaNumeric": "[a-z0-9]{%s}",
    "utils.AlphaNumericExtendedShort": "[a-z0-9_-]{%s}", "utils.AlphaNumericExtended": r"[a-z0-9=_\-]{%s}",
    "utils.AlphaNumericExtendedLong": r"[a-z0-9\/=_\+\-]{%s}",
}
# gitleaks' `utils.GenerateSampleSecrets` lines ({i} identifier, {I} upper-cased, {s} the secret).
SAMPLE_LINES = [
    '{i}Token="{s}"', '{i}Token = "{s}"', "{i}Token={s}", "{i}Token = {s}", '{\n    "{i}_token": "{s}"\n}',
    '{"config.ini": "{I}_TOKEN={s}\\nBACKUP_ENABLED=true"}', "<{i}Token>\n    {s}\n</{i}Token>",
    "{i}_token: {s}", "{i}_token: '{s}'", '{i}_token: "{s}"', 'string {i}Token = "{s}";',
    'var {i}Token string = "{s}"', '{i}Token := "{s}"', "{i}Token := `{s}`", 'String {i}Token = "{s}";',
    'var {i}Token = "{s}"', '${i}Token .= "{s}"', "{i}Token = '{s}'", '{i}Token = "{s}"',
    'System.setProperty("{I}_TOKEN", "{s}")', '  "{i}Token" => "{s}"', '{i}_TOKEN = "{s}"',
    '{i}_TOKEN := "{s}"', '{i}_TOKEN ::= "{s}"', '{i}_TOKEN :::= "{s}"', '{i}_TOKEN ?= "{s}"',
]
# How an agent's answer carries a line it quotes.
SENTENCES = [
    "Sure, put this in your settings and restart the service: {x}",
    "I found this in the logs you pasted:\n```\n{x}\n```\nPlease rotate it.",
    "The deployment failed at the line `{x}` of your config.",
    "Here is the snippet from the support ticket: {x} Let me know if it helps.",
    "> {x}\n\nThat line is why the build was rejected.",
]


def generate(regex: str) -> str:
    """A random string matching `regex` (ASCII; repeats cut at 40 past their minimum)."""
    return "".join(_gen(sre_parse.parse(regex)))


def _gen(items) -> list[str]:  # noqa: C901 - one branch per node kind of the parsed pattern
    out: list[str] = []
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name == "NOT_LITERAL":
            out.append(rng.choice([c for c in "abcXYZ019" if ord(c) != arg]))
        elif name == "ANY":
            out.append(rng.choice("abcdefXYZ0123456789"))
        elif name == "IN":
            out.append(rng.choice(_class(arg)))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, sub = arg
            high = min(high, low + 40)
            for _ in range(rng.randint(low, high)):
                out += _gen(sub)
        elif name == "SUBPATTERN":
            out += _gen(arg[3])
        elif name == "ATOMIC_GROUP":
            out += _gen(arg)
        elif name == "BRANCH":
            out += _gen(rng.choice(arg[1]))
        elif name in ("AT", "ASSERT", "ASSERT_NOT", "GROUPREF"):
            continue
        else:
            raise ValueError(name)
    return out


def _class(items) -> list[str]:
    chars: list[str] = []
    negate = False
    for op, arg in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            chars.append(chr(arg))
        elif name == "RANGE":
            chars += [chr(c) for c in range(arg[0], min(arg[1], 126) + 1)]
        elif name == "CATEGORY":
            chars += {"CATEGORY_DIGIT": list("0123456789"), "CATEGORY_SPACE": [" "],
                      "CATEGORY_WORD": list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"),
                      }.get(str(arg), list("xyz"))
    if negate:
        chars = [c for c in "abcdefghijkLMNOP0123456789" if c not in chars]
    return chars or ["x"]


# --- a reader of the Go expressions in the rule files -------------------------------------------------------
TOKEN = re.compile(r'''\s*(?:(?P<comment>//[^\n]*|/\*.*?\*/)|(?P<s>"(?:\\.|[^"\\])*")|(?P<r>`[^`]*`)|'''
                   r'''(?P<op>:=|\.\.\.|\+=|[-+(){}\[\],=:*])|'''
                   r'''(?P<n>[A-Za-z_][\w.]*)|(?P<num>\d+)|(?P<other>\S))''', re.S)


def tokens(body: str) -> list[tuple[str, str]]:
    out = []
    for m in TOKEN.finditer(body):
        kind = m.lastgroup
        text = m.group(kind)
        if kind == "comment":
            continue
        if kind == "s":
            out.append(("str", _go_string(text)))
        elif kind == "r":
            out.append(("str", text[1:-1]))
        else:
            out.append((kind, text))
    return out


def _go_string(text: str) -> str:
    try:
        return json.loads(text, strict=False)
    except json.JSONDecodeError:  # Go's \x escapes and the like
        return text[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")


class Unreadable(Exception):
    pass


class Reader:
    """Evaluates `name := expr` / `name = expr` statements; values are strings or lists of (text, secret)."""

    def __init__(self, toks):
        self.t, self.i, self.env = toks, 0, {}

    def peek(self, k=0):
        return self.t[self.i + k] if self.i + k < len(self.t) else ("eof", "")

    def take(self, text=None):
        tok = self.peek()
        if text is not None and tok[1] != text:
            raise Unreadable(f"expected {text}, got {tok[1]}")
        self.i += 1
        return tok

    def run(self) -> dict:
        skipped = 0
        while self.peek()[0] != "eof":
            kind, text = self.peek()
            if kind == "n" and self.peek(1)[1] in (":=", "="):
                self.i += 2
                start = self.i
                try:
                    self.env[text] = self.expr()
                except (Unreadable, ValueError, KeyError, IndexError):
                    skipped += 1
                    self.i = start + 1
                continue
            self.i += 1
        self.env["__skipped__"] = skipped
        return self.env

    def expr(self):
        value = self.term()
        while self.peek()[1] == "+":
            self.take()
            right = self.term()
            if not (isinstance(value, str) and isinstance(right, str)):
                raise Unreadable("+ of lists")
            value += right
        return value

    def term(self):
        kind, text = self.take()
        if kind == "str":
            return text
        if kind == "num":
            return text
        if text == "[":
            self.take("]")
            self.take("string")
            return self.items("{", "}")
        if kind == "n" and self.peek()[1] == "(":
            return self.call(text)
        if kind == "n" and text in self.env:
            return self.env[text]
        raise Unreadable(text)

    def items(self, open_, close):
        self.take(open_)
        out = []
        while self.peek()[1] != close:
            value = self.expr()
            spread = self.peek()[1] == "..."
            if spread:
                self.take()
            out += value if spread else [value if isinstance(value, tuple) else (value, None)]
            if self.peek()[1] == ",":
                self.take()
        self.take(close)
        return [v if isinstance(v, tuple) else (v, None) for v in out]

    def call(self, name):
        args = self.items("(", ")")
        values = [text for text, _ in args]
        if name == "secrets.NewSecret":
            return generate(values[0])
        if name in PATTERN_HELPERS:
            return PATTERN_HELPERS[name] % values[0]
        if name == "utils.Hex8_4_4_4_12":
            return "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        if name == "utils.GenerateSampleSecrets":
            ident, secret = values
            return [(line.replace("{i}", ident).replace("{I}", ident.upper()).replace("{s}", secret), secret)
                    for line in SAMPLE_LINES]
        if name == "utils.GenerateSampleSecret":
            return [(f'{values[0]}_api_token = "{values[1]}"', values[1])]
        if name == "append":
            first = self.env_list(args[0])
            return first + [a for a in args[1:]]
        if name == "fmt.Sprintf":
            rest = iter(values[1:])
            return re.sub(r"%[sdv]", lambda _m: next(rest), values[0])
        if name == "strings.Repeat":
            return values[0] * int(values[1])
        raise Unreadable(name)

    def env_list(self, arg):
        text, _ = arg
        if isinstance(text, list):
            return text
        raise Unreadable("append to a non-list")


def read_rules(folder: Path) -> tuple[list[dict], int]:
    samples, skipped = [], 0
    for path in sorted(folder.glob("*.go")):
        source = path.read_text()
        for body in re.split(r"\nfunc ", source)[1:]:
            rule = re.search(r'RuleID:\s*"([^"]+)"', body)
            if not rule or "utils.Validate(" not in body:
                continue
            # Append statements read as `tps = append(tps, ...)`: the reader sees append's first argument
            # as the list already read.
            env = Reader(tokens(body)).run()
            skipped += env.pop("__skipped__")
            for name, label in (("tps", "credential"), ("fps", "false_positive")):
                value = env.get(name)
                for text, secret in (value if isinstance(value, list) else []):
                    if isinstance(text, str) and text.strip():
                        samples.append({"kind": rule.group(1), "label": label, "line": text, "secret": secret})
    return samples, skipped


def main() -> None:
    folder = Path(sys.argv[1])
    samples, skipped = read_rules(folder)
    seen, corpus = set(), []
    for sample in samples:
        key = (sample["kind"], sample["label"], sample["line"])
        if key in seen:
            continue
        seen.add(key)
        sentence = SENTENCES[len(corpus) % len(SENTENCES)]
        sample["text"] = sentence.replace("{x}", sample.pop("line"))
        corpus.append(sample)
    out = Path(__file__).with_name("gitleaks_samples.json")
    out.write_text(json.dumps(corpus, indent=0, ensure_ascii=False) + "\n")
    kinds = {s["kind"] for s in corpus if s["label"] == "credential"}
    print(f"{sum(s['label'] == 'credential' for s in corpus)} credentials of {len(kinds)} kinds, "
          f"{sum(s['label'] == 'false_positive' for s in corpus)} false-positive samples; "
          f"{skipped} statements not read")


if __name__ == "__main__":
    main()


# --- the second set: credentials in the formats their vendors document ---------------------------------------
# (kind, pattern of the documented format). Bodies are random; the prefixes, lengths and alphabets are the
# vendors' (SOURCE.md lists the pages). None of these strings is a real credential.
VENDOR_FORMATS = [
    ("github-classic-pat", r"ghp_[A-Za-z0-9]{36}"),
    ("github-oauth", r"gho_[A-Za-z0-9]{36}"),
    ("github-app-installation", r"ghs_[A-Za-z0-9]{36}"),
    ("github-fine-grained-pat", r"github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}"),
    ("gitlab-pat", r"glpat-[A-Za-z0-9_-]{20}"),
    ("gitlab-routable-pat", r"glpat-[A-Za-z0-9_-]{27,40}\.01\.[a-z0-9]{9}"),
    ("slack-bot-token", r"xoxb-[0-9]{11}-[0-9]{13}-[A-Za-z0-9]{24}"),
    ("slack-config-token", r"xoxe\.xoxp-1-[A-Za-z0-9]{163}"),
    ("slack-webhook", r"https://hooks\.slack\.com/services/T[A-Z0-9]{10}/B[A-Z0-9]{10}/[A-Za-z0-9]{24}"),
    ("stripe-secret-key", r"sk_(live|test)_[A-Za-z0-9]{24,99}"),
    ("stripe-restricted-key", r"rk_(live|test|prod)_[A-Za-z0-9]{24,99}"),
    ("aws-access-key-id", r"AKIA[A-Z2-7]{16}"),
    ("aws-bedrock-api-key", r"ABSKQmVkcm9ja0FQSUtleS[A-Za-z0-9+/]{108}"),
    ("openai-project-key", r"sk-proj-[A-Za-z0-9_-]{74}T3BlbkFJ[A-Za-z0-9_-]{74}"),
    ("anthropic-api-key", r"sk-ant-api03-[A-Za-z0-9_-]{93}AA"),
    ("huggingface-token", r"hf_[A-Za-z]{34}"),
    ("npm-token", r"npm_[A-Za-z0-9]{36}"),
    ("pypi-token", r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{70,120}"),
    ("discord-bot-token", r"[MN][A-Za-z0-9]{23}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{38}"),
    ("shopify-access-token", r"shpat_[a-f0-9]{32}"),
    ("shopify-shared-secret", r"shpss_[a-f0-9]{32}"),
    ("telegram-bot-token", r"[1-9][0-9]{8,9}:AA[A-Za-z0-9_-]{33}"),
    ("google-api-key", r"AIza[0-9A-Za-z_-]{35}"),
    ("sendgrid-api-key", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"),
    ("digitalocean-pat", r"dop_v1_[a-f0-9]{64}"),
    ("databricks-token", r"dapi[a-f0-9]{32}"),
    ("vault-service-token", r"hvs\.[A-Za-z0-9_-]{90}"),
    ("terraform-cloud-token", r"[a-z0-9]{14}\.atlasv1\.[a-z0-9_=-]{67}"),
    ("azure-storage-connection-string",
     r"DefaultEndpointsProtocol=https;AccountName=[a-z0-9]{10};AccountKey=[A-Za-z0-9+/]{86}==;EndpointSuffix=core\.windows\.net"),
    ("postman-api-key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),
    ("linear-api-key", r"lin_api_[A-Za-z0-9]{40}"),
    ("grafana-service-account-token", r"glsa_[A-Za-z0-9]{32}_[a-f0-9]{8}"),
    ("doppler-token", r"dp\.st\.[a-z0-9_-]{2,35}\.[A-Za-z0-9]{43}"),
    ("evalhub-api-token", r"evh_[A-Za-z0-9_-]{43}"),
]
VENDOR_SENTENCES = [
    "Your key is {x}.", "Use \"{x}\" in the header.", "The config now reads {{\"token\": \"{x}\"}} and works.",
    "Set it with `export TOKEN={x}` and retry.", "I rotated the old one; the new one is {x}, keep it safe.",
    "- **token**: {x}\n- **region**: eu-west-1", "({x})", "Call https://api.example.com/v1?key={x}&page=2 again.",
]


def _jwt() -> str:
    import base64

    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")
    claims = {"sub": generate("[0-9]{8}"), "name": "Jane Roe", "iat": 1700000000 + rng.randint(0, 10**7)}
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.{generate('[A-Za-z0-9_-]{43}')}"


def _private_key() -> str:
    lines = [generate("[A-Za-z0-9+/]{64}") for _ in range(8)] + [generate("[A-Za-z0-9+/]{20}") + "=="]
    return "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END RSA PRIVATE KEY-----"


def vendor_samples(per_kind: int = 8) -> list[dict]:
    samples = []
    makers = [(kind, lambda pattern=pattern: generate(pattern)) for kind, pattern in VENDOR_FORMATS]
    makers += [("jwt", _jwt), ("private-key", _private_key),
               ("basic-auth-url", lambda: f"https://deploy:{generate('[A-Za-z0-9]{16}')}@git.example.com/repo.git")]
    for kind, make in makers:
        for i in range(per_kind):
            secret = make()
            sentence = VENDOR_SENTENCES[i % len(VENDOR_SENTENCES)]
            samples.append({"kind": kind, "label": "credential", "secret": secret,
                            "text": sentence.replace("{{", "{").replace("}}", "}").replace("{x}", secret)})
    return samples


if __name__ == "__main__":
    Path(__file__).with_name("vendor_samples.json").write_text(
        json.dumps(vendor_samples(), indent=0, ensure_ascii=False) + "\n")
