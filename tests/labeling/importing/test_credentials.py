"""The credential rules no_secrets and the `secret` redaction share: every family the scanner's plugins
claim is found in the shapes the plugins document, and ordinary support text never is.

Every example is synthetic and built from pieces, so no scanner takes this file for a leak."""

import pytest

from labeling.importing.credentials import credential_kinds, credential_spans, scanner_kinds
from labeling.importing.redaction import Placeholders, Redactor

HEX = "0123456789abcdef"
ALNUM = "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0"


def run(chars: str, n: int) -> str:
    return (chars * (n // len(chars) + 1))[:n]


# kind -> examples, in the shapes the rules document.
EXAMPLES = {
    "AWS Access Key": ["AKIA" + "IOSFODNN7EXAMPLE", "ASIA" + "Y34FZKBOKMUTVV7A"],
    "Artifactory Credentials": ["token: AKC" + run(ALNUM, 20), 'password="AP6' + run(ALNUM, 12) + '"'],
    "Azure Storage Account access key": ["DefaultEndpointsProtocol=https;AccountKey=" + run(ALNUM + "+/", 86) + "=="],
    "Basic Auth Credentials": ["https://admin:" + "s3cr3t-pass" + "@db.example.com/shop"],
    "Cloudant Credentials": ['cloudant_password = "' + run(HEX, 64) + '"'],
    "Discord Bot Token": ["M" + run(ALNUM, 23) + "." + "Gx1Yz2" + "." + run(ALNUM, 27)],
    "GitHub Token": ["ghp_" + run(ALNUM, 36), "ghs_" + run(ALNUM, 36)],
    "GitLab Token": ["glpat-" + run(ALNUM, 20), "glrt-" + run(ALNUM, 24)],
    "IBM COS HMAC Credentials": ['cos_hmac_secret_access_key = "' + run(HEX, 48) + '"'],
    "IBM Cloud IAM Key": ['ibm_cloud_iam_api_key = "' + run(ALNUM + "_-", 44) + '"'],
    "JSON Web Token": ["eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
                       + ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"],
    "Mailchimp Access Key": [run(HEX, 32) + "-us12"],
    "NPM tokens": ["//registry.npmjs.org/:_authToken=npm_" + run(ALNUM, 36)],
    "OpenAI Token": ["sk-proj-" + run(ALNUM, 20) + "T3Blbk" + "FJ" + run(ALNUM, 20)],
    "Private Key": ["-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn",
                    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
                    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC"],
    "PyPI Token": ["pypi-AgEIcHlwaS5vcmc" + run(ALNUM + "-_", 80)],
    "SendGrid API Key": ["SG." + run(ALNUM, 22) + "." + run(ALNUM, 43)],
    "Slack Token": ["xoxb-" + "123456789012-1234567890123-" + "abcdefghijklmnopqrstuvwx",
                    "https://hooks.slack.com/services/T" + "00000000/B00000000/" + run(ALNUM, 24)],
    "SoftLayer Credentials": ['softlayer_api_key = "' + run("abcdef0123456789", 64) + '"'],
    "Square OAuth Secret": ["sq0csp-" + run(ALNUM, 43)],
    "Stripe Access Key": ["sk_live_" + run(ALNUM, 24), "rk_live_" + run(ALNUM, 24)],
    "Telegram Bot Token": ["123456789:" + run(ALNUM + "_-", 35)],
    "Twilio API Key": ["AC" + run("abcdef0123456789", 32), "SK" + run("abcdef0123456789", 32)],
    # The shapes evalhub adds where the plugins have none yet.
    "Anthropic API Key": ["sk-ant-api03-" + run(ALNUM, 40)],
    "OpenAI API Key": ["sk-proj-" + run(ALNUM, 40)],
    "AWS Secret Access Key": ["aws_secret_access_key = " + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"],
    "GitHub Fine-grained Token": ["github_pat_" + "11ABCDEFG0123456789_" + run(ALNUM, 30)],
    "Google API Key": ["AIza" + run(ALNUM + "_-", 35)],
    "Bearer Token": ["Authorization: Bearer " + run(HEX, 32)],
}

def secret_of(example: str) -> str:
    """The credential in an example: after its label, without quotes; a private key's body; a URL's password."""
    if "PRIVATE KEY" in example:
        return example.split("\n", 1)[1]
    if "@" in example:
        return example.split(":")[2].split("@")[0]
    for label in ("AccountKey=", "Bearer ", "_authToken=", ' = "', " = ", '="', ": "):
        if label in example:
            return example.split(label, 1)[1].strip('"')
    return example


ORDINARY = [
    "Your order ORD-2024-000123456 shipped; tracking number 1Z999AA10123456784 (UPS).",
    "Order #48213377 for $1,299.99 was placed on 2024-03-05 at 14:32 and refunded on 05/04/2024.",
    "Refund ref 550e8400-e29b-41d4-a716-446655440000 was issued for order 98765432101234.",
    "Commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3 fixed it; short hash 9fceb02.",
    "Digest sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 matches.",
    "Tracking 9400111899223197428490 (USPS), JD014600006281234567 (DHL), 420902109405511899223197428490.",
    "Ticket INC0012345, case 00123456, invoice INV-2024-0042, SKU AB-1234-XL, € 49,90 incl. VAT.",
    "The bearer of this letter may collect parcel 0x7f3a9b2c4d5e6f708192a3b4c5d6e7f8 at the desk.",
    "Ask-me-anything session: risk-assessment-for-the-quarterly-report-2024 is attached.",
    "Your password was reset. Use the link we sent; our API returned status 200 in 35 ms.",
]


def test_every_family_the_rules_claim_has_an_example():
    # A new release of the scanner adds plugins: this fails until each has an example here.
    assert sorted(EXAMPLES) == sorted(scanner_kinds())


@pytest.mark.parametrize("kind, example", [(k, e) for k, examples in EXAMPLES.items() for e in examples])
def test_each_family_is_found_by_its_kind(kind, example):
    text = f"Sure, here it is: {example} - keep it safe."
    assert credential_kinds(text) == [kind]


@pytest.mark.parametrize("kind, example", [(k, e) for k, examples in EXAMPLES.items() for e in examples])
def test_the_secret_redaction_hides_each_whole_credential(kind, example):
    secret = secret_of(example)
    redacted = Redactor(["secret"]).text(f"Sure, here it is: {example}\nkeep it safe.", Placeholders())
    assert "[SECRET_1]" in redacted and redacted.startswith("Sure, here it is: ")
    assert secret not in redacted
    # Nothing long of the credential is left either (a head or tail of 8 characters at most).
    assert not any(secret[i:i + 9] in redacted for i in range(len(secret) - 8) if "[" not in secret[i:i + 9])


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_support_text_is_never_a_credential(text):
    assert credential_spans(text) == []


def test_it_reports_kinds_never_values():
    key = EXAMPLES["GitHub Token"][0]
    kinds = credential_kinds(f"{key} and {key} and {EXAMPLES['Stripe Access Key'][0]}")
    assert kinds == ["GitHub Token", "Stripe Access Key"]
    assert not any(key[4:] in kind for kind in kinds)
