"""The credentials no_secrets and the `secret` redaction find (labeling/importing/credentials.py): a
maintained scanner's catalog, in prose as an agent writes it, and evalhub's own additions; ordinary support
text never. The broad measurement is benchmarks/bench_secrets.py; these are the cases that must not regress,
among them each credential the scanner before it missed or left part of (docs/security.md).

Every example is synthetic: built from pieces, with random bodies of a fixed seed, so no scanner takes this
file for a leak and none of them is a real credential."""

import base64
import json
import random

import pytest

from labeling.importing.credentials import (
    ADDED_SHAPES,
    credential_kinds,
    credential_spans,
    rule_count,
    scanner_identity,
    scanner_version,
)
from labeling.importing.redaction import Placeholders, Redactor

_rng = random.Random(47)
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
HEX = "0123456789abcdef"


def rand(chars: str, n: int) -> str:
    return "".join(_rng.choice(chars) for _ in range(n))


def jwt() -> str:
    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")
    return part({"alg": "HS256", "typ": "JWT"}) + "." + part({"sub": "1234567890", "name": "Jane"}) + "." + rand(
        ALNUM + "_-", 43)


# What the scanner before this one missed entirely (docs/security.md, "Finding credentials"): name -> the
# credential as it stands in an answer.
MISSED_BEFORE = {
    "Stripe test secret key": "sk_" + "test_" + rand(ALNUM, 99),
    "Stripe restricted production key": "rk_" + "prod_" + rand(ALNUM, 99),
    "Azure AD client secret": "bP8" + "8Q~" + rand(ALNUM, 34),
    "Azure storage account key": "DefaultEndpointsProtocol=https;AccountName=shopdata;AccountKey="
                                 + rand(ALNUM + "+/", 86) + "==;EndpointSuffix=core.windows.net",
    "npm token": "npm_" + rand(ALNUM, 36),
    "PyPI token": "pypi-" + "AgEIcHlwaS5vcmc" + rand(ALNUM + "-_", 80),
    "Discord token": "discordToken=" + rand(HEX, 64),
    "Shopify access token": "shp" + "at_" + rand(HEX, 32),
    "Shopify shared secret": "shp" + "ss_" + rand(HEX, 32),
    "Hugging Face token": "hf_" + rand(ALNUM[:52], 34),
    "JSON Web Token in base64": base64.b64encode(jwt().encode()).decode(),
    "Bedrock long-lived key": "ABSK" + "QmVkcm9ja0FQSUtleS" + rand(ALNUM + "+/", 108),
    "Bedrock short-lived key": "bedrock-api-key-" + "YmVkcm9jay5hbWF6b25hd3MuY29t",
    "evalhub API token": "evh_" + rand(ALNUM + "_-", 43),
}

# What it found but left part of: the whole credential must go, the part it left included.
LEFT_PART_BEFORE = {
    "Slack config token (its xoxe. prefix)": ("xoxe." + "xoxp-1-" + rand(ALNUM, 163), "xoxe."),
    "GitLab routable token (after its dot)": ("glpat-" + rand(ALNUM, 27) + ".01." + "0w0kdmcbd", "0w0kdmcbd"),
    "Telegram bot token (its bot id)": ("TELEGRAM_API_TOKEN = " + "1234567890123456:" + "AA" + rand(ALNUM + "_-", 33),
                                        "123456"),
}

# Credentials of other kinds, each in its vendor's documented shape.
OTHERS = {
    "GitHub token": "ghp_" + rand(ALNUM, 36),
    "GitHub fine-grained token": "github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59),
    "GitLab token": "glpat-" + rand(ALNUM, 20),
    "Slack bot token": "xoxb-" + "123456789012-1234567890123-" + rand(ALNUM, 24),
    "Stripe live key": "sk_" + "live_" + rand(ALNUM, 24),
    "AWS access key id": "AKIA" + rand("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16),
    "OpenAI key": "sk-proj-" + rand(ALNUM, 74) + "T3Blbk" + "FJ" + rand(ALNUM, 74),
    "Anthropic key": "sk-ant-api03-" + rand(ALNUM + "_-", 93) + "AA",
    "Google API key": "AIza" + rand(ALNUM + "_-", 35),
    "SendGrid key": "SG." + rand(ALNUM, 22) + "." + rand(ALNUM, 43),
    "JSON Web Token": jwt(),
    "private key": "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(rand(ALNUM + "+/", 64) for _ in range(6))
                   + "\n-----END RSA PRIVATE KEY-----",
}

# The credential in an example that carries its label or context: what must go.
LABELLED = {
    "Azure storage account key": lambda text: text.split("AccountKey=")[1].split(";")[0],
    "Discord token": lambda text: text.split("=", 1)[1],
    "Telegram bot token (its bot id)": lambda text: text.split(" = ", 1)[1],
}

ALL = {**MISSED_BEFORE, **{name: value for name, (value, _) in LEFT_PART_BEFORE.items()}, **OTHERS}

# How an answer carries a credential: ending a sentence, in brackets, quotes, JSON, a URL's query, Markdown.
PLACES = [
    "Your key is {}.", "Here it is: {}, keep it safe.", "({})", 'Use "{}" in the header.', '{{"token": "{}"}}',
    "Call https://api.example.com/v1?key={}&page=2 again.", "- **token**: {}\n- region: eu-west-1", "`{}`",
]

ORDINARY = [
    "Your order ORD-2024-000123456 shipped; tracking number 1Z999AA10123456784 (UPS).",
    "Order #48213377 for $1,299.99 was placed on 2024-03-05 at 14:32 and refunded on 05/04/2024.",
    "Refund ref 550e8400-e29b-41d4-a716-446655440000 was issued for order 98765432101234.",
    "Commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3 fixed it; short hash 9fceb02.",
    "Digest sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 matches.",
    "Tracking 9400111899223197428490 (USPS), JD014600006281234567 (DHL), 420902109405511899223197428490.",
    "Ticket INC0012345, case 00123456, invoice INV-2024-0042, SKU AB-1234-XL, € 49,90 incl. VAT.",
    "Use the coupon code SAVE20-SPRING24 at checkout; promo WELCOME-7X9K2Q gives free shipping.",
    "See https://shop.example.com/orders?id=118273&utm_source=email&utm_campaign=spring for the details.",
    "The Stripe charge ch_3NqYbq2eZvKYlo2C0X5gXG1k and payment intent pi_3MtwBwLkdIwHu7ix28a3tqPa were refunded.",
    "The bearer of this letter may collect parcel 0x7f3a9b2c4d5e6f708192a3b4c5d6e7f8 at the desk.",
    "Your password was reset. Use the link we sent; our API returned status 200 in 35 ms.",
]


@pytest.mark.parametrize("name", list(ALL))
@pytest.mark.parametrize("place", PLACES)
def test_each_credential_is_found_and_redacted_whole_wherever_it_stands(name, place):
    value = ALL[name]
    text = f"Sure. {place.format(value)} Anything else?"
    assert credential_kinds(text), name
    redacted = Redactor(["secret"]).text(text, Placeholders())
    assert "[SECRET_1]" in redacted and redacted.startswith("Sure. ")
    secret = LABELLED[name](value) if name in LABELLED else value
    assert secret not in redacted
    # Nothing long of it is left either: no run of 8 of its characters.
    assert not any(secret[i:i + 8] in redacted for i in range(len(secret) - 7)), redacted


@pytest.mark.parametrize("name", list(LEFT_PART_BEFORE))
def test_the_part_the_scanner_before_left_is_redacted_too(name):
    value, part = LEFT_PART_BEFORE[name]
    secret = LABELLED[name](value) if name in LABELLED else value
    redacted = Redactor(["secret"]).text(f"The token is {value}. Rotate it.", Placeholders())
    assert redacted == f"The token is {value.removesuffix(secret)}[SECRET_1]. Rotate it."
    assert part not in redacted


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_support_text_is_never_a_credential(text):
    assert credential_spans(text) == []


def test_it_reports_kinds_never_values():
    key, stripe = OTHERS["GitHub token"], OTHERS["Stripe live key"]
    kinds = credential_kinds(f"{key} and {key} and {stripe}")
    assert kinds == ["betterleaks.github-pat", "betterleaks.stripe-access-token"]
    assert not any(key[4:] in kind for kind in kinds)


def test_overlapping_finds_are_one_credential_whose_span_covers_them_all():
    # The routable GitLab token is two rules' (its head is an ordinary token's): one span, the whole token.
    value = LEFT_PART_BEFORE["GitLab routable token (after its dot)"][0]
    assert credential_spans(f"x {value} y") == [("betterleaks.gitlab-pat-routable-versioned", 2, 2 + len(value))]


def test_spans_are_in_characters_in_text_of_any_script():
    value = OTHERS["GitHub token"]
    text = f"Clé personnelle — « {value} », à garder."
    [(_, start, end)] = credential_spans(text)
    assert text[start:end] == value
    assert credential_spans("\ud800 " + value)[0][1:] == (2, 2 + len(value))  # a lone surrogate from JSON


def test_evalhubs_additions_are_kinds_of_their_own():
    assert [kind for kind, _, _ in ADDED_SHAPES] == ["evalhub.api-token", "evalhub.aws-access-key-id",
                                                  "evalhub.stripe-test-key", "evalhub.azure-ad-client-secret",
                                                  "evalhub.private-key-block", "evalhub.bearer-token"]
    assert credential_kinds(MISSED_BEFORE["evalhub API token"]) == ["evalhub.api-token"]
    assert credential_kinds("evh_" + "short") == []


def test_the_scanner_identity_names_its_version_and_catalog():
    identity = scanner_identity()
    assert identity.startswith(f"kingfisher-secret-scanner {scanner_version()}; {rule_count()} rules")
    assert rule_count() > 400  # the catalog is several hundred kinds, not a hand-kept list
