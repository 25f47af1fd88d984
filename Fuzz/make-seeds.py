#!/usr/bin/env python3
"""Writes the seed corpora in Fuzz/corpus/<target>/ (run from anywhere; rerunning rewrites
them). JSON and envelope seeds are the spool examples; journal seeds are real frames encoded
here the way Sources/PushJournal/Format.swift encodes them (CRC32C, masked); the rest are
small hand-made inputs that reach each parser's branches."""
import os, struct, shutil, glob

ROOT = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(ROOT)
CORPUS = os.path.join(ROOT, "corpus")

def table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t
T = table()

def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF

def mask(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

def segment_header(first_seq, journal_id=bytes([7] * 16)):
    out = b"PNJSEG1\0" + struct.pack("<HHIQq", 1, 0, 64, first_seq, 0) + journal_id + bytes(12)
    return out + struct.pack("<I", mask(crc32c(out)))

def frame(seq, key, body, millis=1_700_000_000_000):
    key = key.encode()
    whole = key + body
    rest = struct.pack("<IHBBQqII", len(whole), len(key), 1, 0, seq, millis, mask(crc32c(whole)), 0)
    out = struct.pack("<II", 0x31524A50, mask(crc32c(rest))) + rest + whole
    return out + bytes((-len(out)) % 8)

def committed(seq, first, end):
    rest = struct.pack("<QQq", seq, first, end)
    return struct.pack("<II", 0x4D434A50, mask(crc32c(rest))) + rest

def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())

shutil.rmtree(CORPUS, ignore_errors=True)
examples = sorted(glob.glob(os.path.join(REPO, "spool-examples", "*.json")))
for path in examples:
    data = open(path, "rb").read()
    write("json", os.path.basename(path), data)
    if os.path.basename(path).startswith(("event-", "envelope-")):
        write("envelope", os.path.basename(path), data)

bodies = [b'{"title":"a"}', b'{}', b'{"n":[1,2.5,null,true,"\\u00e9"]}']
records = [frame(i + 1, "k%d" % i, b) for i, b in enumerate(bodies)]
write("journal-frame", "one-record", records[0])
write("journal-frame", "segment-header", segment_header(1))
write("journal-frame", "committed", committed(3, 1, 64 + sum(map(len, records))))
write("journal-frame", "long-key", frame(9, "x" * 255, b'"v"'))
# journal-recovery: an odd first byte puts a valid segment header in front of the rest.
write("journal-recovery", "three-records", b"\x01" + b"".join(records))
write("journal-recovery", "torn-tail", b"\x01" + b"".join(records)[:-5])
write("journal-recovery", "zero-tail", b"\x01" + b"".join(records) + bytes(40))
write("journal-recovery", "bad-middle", b"\x01" + records[0] + b"\xff" * 48 + records[2])
write("journal-recovery", "raw-segment", segment_header(1) + records[0])
write("journal-recovery", "seq-gap", b"\x01" + records[0] + frame(5, "k5", b'{}'))
# journal-archive: the same shape (an odd first byte puts a valid segment header in front);
# the target compresses the segment as retention does and reads it back as an archive.
write("journal-archive", "three-records", b"\x01" + b"".join(records))
write("journal-archive", "torn-tail", b"\x01" + b"".join(records)[:-5])
write("journal-archive", "seq-gap", b"\x01" + records[0] + frame(5, "k5", b'{}'))
write("journal-archive", "raw-segment", segment_header(1) + records[0] + records[1])
write("journal-archive", "long-key", b"\x01" + frame(1, "x" * 255, b'"v"'))

conf = open(os.path.join(REPO, "packaging", "pushspool.conf"), "rb").read()
write("config", "packaged.conf", conf)
write("config", "small.conf", "[Spool]\nDirectory=/tmp/x\n\n[Journal]\nSegmentSize=1M\n")
write("config", "comments.conf", "# c\n; c\n[Media]\nEnabled = yes\n\n[Inbox]\nEnabled=no\n")
write("config", "category.conf", "[Category promo]\nActions=open,dismiss\n")

write("media-sniff", "png", bytes([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13]))
write("media-sniff", "jpeg", bytes([0xFF, 0xD8, 0xFF, 0xE0]))
write("media-sniff", "gif", b"GIF89a\x01\x00")
write("media-sniff", "webp", b"RIFF\x10\x00\x00\x00WEBPVP8 ")
write("media-sniff", "heic", b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00")
write("media-sniff", "mp4", b"\x00\x00\x00\x20ftypisom\x00\x00\x02\x00")
write("media-sniff", "mp3-id3", b"ID3\x03\x00\x00\x00")
write("media-sniff", "mp3-frame", bytes([0xFF, 0xFB, 0x90, 0x64]))

# inbox-request: flags byte (odd = authenticated), then NUL-separated method, path, query,
# headers, body.
def req(flags, method, path, query="", headers="", body=b""):
    return bytes([flags]) + b"\0".join([method.encode(), path.encode(), query.encode(), headers.encode(), body])
write("inbox-request", "list", req(1, "GET", "/v1/inbox", "limit=10&unread=true&category=promo"))
write("inbox-request", "cursor", req(1, "GET", "/v1/inbox", "cursor=c1.ff&limit=500"))
write("inbox-request", "bad-cursor", req(1, "GET", "/v1/inbox", "cursor=c1.zz"))
write("inbox-request", "counts", req(1, "GET", "/v1/inbox/counts", "", "X-Pushspool-User: alice"))
write("inbox-request", "inapp", req(1, "GET", "/v1/inapp"))
write("inbox-request", "read-all", req(1, "POST", "/v1/inbox/read-all", "", "Idempotency-Key: k1"))
write("inbox-request", "seen", req(1, "POST", "/v1/inbox/12/seen"))
write("inbox-request", "action", req(1, "POST", "/v1/inbox/12/actions/reply", "", "", b'{"text":"hi"}'))
write("inbox-request", "nc-open", req(1, "POST", "/v1/events/nc-open", "", "X-Pushspool-Device: d1"))
write("inbox-request", "open", req(1, "POST", "/v1/inbox/12/open", "", "X-Pushspool-Device: d1\nIdempotency-Key: k2"))
write("inbox-request", "inapp-shown", req(1, "POST", "/v1/inapp/12/shown"))
write("inbox-request", "inapp-optout", req(1, "PUT", "/v1/inapp/optout", "", "", b'{"enabled":true}'))
write("inbox-request", "media", req(1, "GET", "/v1/media/" + "a" * 64 + "/thumb"))
write("inbox-request", "unauthenticated", req(0, "GET", "/v1/inbox", "user=bob&token=abc"))
write("inbox-request", "metrics", req(0, "GET", "/metrics"))
write("inbox-request", "page", req(0, "GET", "/"))
