"""Signs a webhook delivery the way its sender does, with the sender's own library.

The end-to-end tests and the demo POST what this prints; they never sign with the project's
own code, so a receiver that misreads a scheme fails against the real senders' libraries.

    python sign.py SCHEME ID TIMESTAMP SECRET [SECRET...] < body

SCHEME is one of:

- standard-webhooks: `standardwebhooks`, headers `webhook-id`, `webhook-timestamp`,
  `webhook-signature`;
- svix: Svix's own library (`svix`), under Svix's header names `svix-id`, `svix-timestamp`,
  `svix-signature`;
- stripe: `stripe`, header `Stripe-Signature` (ID is ignored: the event id is the body's `id`);
- github: `githubkit.webhooks.sign`, headers `X-Hub-Signature-256` and `X-GitHub-Delivery: ID`
  (TIMESTAMP is ignored: GitHub signs none);
- slack: `slack_sdk.signature.SignatureVerifier.generate_signature`, headers
  `X-Slack-Request-Timestamp` and `X-Slack-Signature` (ID is ignored: the id is the body's
  `event_id`);
- shopify: Shopify publishes no signing library (`shopifyapi` verifies OAuth parameters only),
  so its documented recipe, with Python's own `hmac` and `base64`: the base64 HMAC-SHA256 of the
  body under the app's client secret, header `X-Shopify-Hmac-Sha256`, and
  `X-Shopify-Webhook-Id: ID`.

Prints the request's signature headers as one JSON object. With several secrets (a sender
rolling its secret) it signs with each and sends all the signatures where the scheme has room
for several (Standard Webhooks and Svix as a space-separated list of `v1,<base64>`, Stripe as one
`t=` with several `v1=`); GitHub, Slack and Shopify send one signature, so there only the first
secret signs.
"""

import json
import sys
from datetime import datetime, timezone


def standard_webhooks(msg_id, timestamp, secrets, body):
    from standardwebhooks.webhooks import Webhook

    return signed_by(Webhook, "webhook", msg_id, timestamp, secrets, body)


def svix(msg_id, timestamp, secrets, body):
    from svix.webhooks import Webhook

    return signed_by(Webhook, "svix", msg_id, timestamp, secrets, body)


def signed_by(webhook, prefix, msg_id, timestamp, secrets, body):
    """The headers `prefix`-id, -timestamp and -signature, signed by the sender's own library's
    `webhook` class (Standard Webhooks and Svix sign alike, each with its own code)."""
    at = datetime.fromtimestamp(timestamp, tz=timezone.utc)
    signatures = [webhook(s).sign(msg_id=msg_id, timestamp=at, data=body) for s in secrets]
    return {
        f"{prefix}-id": msg_id,
        f"{prefix}-timestamp": str(timestamp),
        f"{prefix}-signature": " ".join(signatures),
    }


def stripe(timestamp, secrets, body):
    from stripe import WebhookSignature

    parts = [f"t={timestamp}"]
    for s in secrets:
        header = WebhookSignature.generate_signature_header(body, s, timestamp=timestamp)
        parts.extend(p for p in header.split(",") if not p.startswith("t="))
    return {"Stripe-Signature": ",".join(parts)}


def github(delivery, secret, body):
    from githubkit.webhooks import sign

    return {"X-Hub-Signature-256": sign(secret, body), "X-GitHub-Delivery": delivery}


def slack(timestamp, secret, body):
    from slack_sdk.signature import SignatureVerifier

    signature = SignatureVerifier(signing_secret=secret).generate_signature(
        timestamp=str(timestamp), body=body
    )
    return {"X-Slack-Request-Timestamp": str(timestamp), "X-Slack-Signature": signature}


def shopify(webhook_id, secret, body):
    import base64
    import hashlib
    import hmac

    digest = hmac.new(secret.encode("utf-8"), body.encode("utf-8"), hashlib.sha256).digest()
    return {
        "X-Shopify-Hmac-Sha256": base64.b64encode(digest).decode("ascii"),
        "X-Shopify-Webhook-Id": webhook_id,
    }


def main(argv):
    if len(argv) < 5:
        sys.exit(__doc__)
    scheme, msg_id, timestamp, secrets = argv[1], argv[2], int(argv[3]), argv[4:]
    body = sys.stdin.buffer.read().decode("utf-8")
    if scheme == "standard-webhooks":
        headers = standard_webhooks(msg_id, timestamp, secrets, body)
    elif scheme == "svix":
        headers = svix(msg_id, timestamp, secrets, body)
    elif scheme == "stripe":
        headers = stripe(timestamp, secrets, body)
    elif scheme == "github":
        headers = github(msg_id, secrets[0], body)
    elif scheme == "slack":
        headers = slack(timestamp, secrets[0], body)
    elif scheme == "shopify":
        headers = shopify(msg_id, secrets[0], body)
    else:
        sys.exit(f"unknown scheme {scheme!r}: standard-webhooks, svix, stripe, github, slack or shopify")
    print(json.dumps(headers))


if __name__ == "__main__":
    main(sys.argv)
