#!/usr/bin/env python3
"""Drives pushspool-inbox through a client generated from docs/openapi.yaml.

scripts/api-conformance.sh generates the client with openapi-python-client into a temporary
directory (on PYTHONPATH) and runs this against the server it started, for a user with a few
unread pushes:

    api-client-roundtrip.py --url http://127.0.0.1:PORT --user U --token T --package NAME

list -> open -> counts: the user's items are listed, unread; opening the first is accepted
(202, the item read and seen in the answer, a retry under the same Idempotency-Key answers the
same eventId); the counts go down by one once pushspoold has applied the event, and the list
then shows the item read. An unknown item answers 404 with the document's Error. Any
difference is an AssertionError (exit 1).
"""

import argparse
import importlib
import sys
import time
import uuid


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--package", required=True, help="the generated client's package")
    parser.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the open to be applied")
    args = parser.parse_args()

    client_module = importlib.import_module(args.package)
    list_inbox = importlib.import_module(f"{args.package}.api.inbox.list_inbox")
    open_item = importlib.import_module(f"{args.package}.api.inbox.open_item")
    get_counts = importlib.import_module(f"{args.package}.api.inbox.get_counts")
    models = importlib.import_module(f"{args.package}.models")

    client = client_module.AuthenticatedClient(
        base_url=args.url, token=args.token, headers={"X-Pushspool-User": args.user}, raise_on_unexpected_status=True
    )

    def counts():
        answer = get_counts.sync_detailed(client=client)
        assert answer.status_code == 200, f"counts: {answer.status_code} {answer.content!r}"
        assert isinstance(answer.parsed, models.AllCounts), f"counts: {answer.parsed!r}"
        return answer.parsed.unseen, answer.parsed.unread

    def listing():
        answer = list_inbox.sync_detailed(client=client, limit=100)
        assert answer.status_code == 200, f"list: {answer.status_code} {answer.content!r}"
        assert isinstance(answer.parsed, models.ListInboxResponse200), f"list: {answer.parsed!r}"
        return answer.parsed.items

    items = listing()
    assert items, f"list: no items for {args.user}"
    unseen, unread = counts()
    assert unread == sum(not item.state.read for item in items), f"counts: unread {unread} for {len(items)} listed items"
    target = items[0]
    assert not target.state.read and not target.state.seen, f"item {target.item} is not new: {target.state!r}"
    print(f"list: {len(items)} items; counts unseen={unseen} unread={unread}; opening item {target.item}")

    key = str(uuid.uuid4())
    answer = open_item.sync_detailed(target.item, client=client, x_pushspool_device="roundtrip-device", idempotency_key=key)
    assert answer.status_code == 202, f"open: {answer.status_code} {answer.content!r}"
    opened = answer.parsed
    assert isinstance(opened, models.OpenItemResponse202), f"open: {opened!r}"
    assert opened.item.item == target.item and opened.item.state.read and opened.item.state.seen, f"open: {opened.item!r}"
    again = open_item.sync_detailed(target.item, client=client, x_pushspool_device="roundtrip-device", idempotency_key=key)
    assert again.status_code == 202 and again.parsed.event_id == opened.event_id, \
        f"open retried under the same Idempotency-Key: {again.status_code} {again.content!r} (first: {opened.event_id})"
    print(f"open: 202, event {opened.event_id} (the same on a retry)")

    deadline = time.monotonic() + args.wait
    while counts() != (unseen - 1, unread - 1):
        assert time.monotonic() < deadline, f"counts: still {counts()} {args.wait} s after the open, expected {(unseen - 1, unread - 1)}"
        time.sleep(0.1)
    print(f"counts: unseen={unseen - 1} unread={unread - 1}")
    after = {item.item: item for item in listing()}
    assert target.item in after and after[target.item].state.read, f"list after open: {after.get(target.item)!r}"

    missing = open_item.sync_detailed("999999999", client=client)
    assert missing.status_code == 404 and isinstance(missing.parsed, models.Error), f"unknown item: {missing.status_code} {missing.content!r}"
    print("api-client-roundtrip: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
