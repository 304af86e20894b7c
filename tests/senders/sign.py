"""Signs a webhook delivery the way its sender does, with the sender's own library.

The end-to-end tests and the demo POST what this prints; they never sign with the project's
own code, so a receiver that misreads a scheme fails against the real senders' libraries.

    python sign.py standard-webhooks ID TIMESTAMP SECRET [SECRET...] < body
    python sign.py stripe ID TIMESTAMP SECRET [SECRET...] < body

Prints the request's signature headers as one JSON object. With several secrets (a sender
rolling its secret) it signs with each and sends all the signatures, as the senders do:
Standard Webhooks as a space-separated list of `v1,<base64>`, Stripe as one `t=` with several
`v1=`. `ID` is the delivery's `webhook-id` (Standard Webhooks); Stripe signs no id header, so
it is ignored there (the event id is the body's own `id`).
"""

import json
import sys
from datetime import datetime, timezone


def standard_webhooks(msg_id, timestamp, secrets, body):
    from standardwebhooks.webhooks import Webhook

    at = datetime.fromtimestamp(timestamp, tz=timezone.utc)
    signatures = [Webhook(s).sign(msg_id=msg_id, timestamp=at, data=body) for s in secrets]
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(signatures),
    }


def stripe(timestamp, secrets, body):
    from stripe import WebhookSignature

    parts = [f"t={timestamp}"]
    for s in secrets:
        header = WebhookSignature.generate_signature_header(body, s, timestamp=timestamp)
        parts.extend(p for p in header.split(",") if not p.startswith("t="))
    return {"Stripe-Signature": ",".join(parts)}


def main(argv):
    if len(argv) < 5:
        sys.exit(__doc__)
    scheme, msg_id, timestamp, secrets = argv[1], argv[2], int(argv[3]), argv[4:]
    body = sys.stdin.buffer.read().decode("utf-8")
    if scheme == "standard-webhooks":
        headers = standard_webhooks(msg_id, timestamp, secrets, body)
    elif scheme == "stripe":
        headers = stripe(timestamp, secrets, body)
    else:
        sys.exit(f"unknown scheme {scheme!r}: standard-webhooks or stripe")
    print(json.dumps(headers))


if __name__ == "__main__":
    main(sys.argv)
