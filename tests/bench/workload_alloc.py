# workload_alloc.py - a real workload for bench_preload: python3 doing
# what allocates most in Python programs (dicts, lists, tuples, strings,
# JSON in and out), for a second or two. Deterministic; prints one line.
import json


def records(n):
    out = []
    for i in range(n):
        out.append({
            "id": i,
            "name": "user%06d" % (i * 7919 % n),
            "tags": ["t%d" % (i % 13), "g%d" % (i % 7)],
            "score": (i * 31 % 1000) / 10.0,
            "parent": {"id": i // 10, "path": "/a/%d/b/%d" % (i % 97, i % 89)},
        })
    return out


def group(rows):
    by_tag = {}
    for r in rows:
        for t in r["tags"]:
            by_tag.setdefault(t, []).append(r["id"])
    return {t: sorted(ids, reverse=True)[:50] for t, ids in by_tag.items()}


def words(rows):
    counts = {}
    for r in rows:
        for w in (r["name"] + " " + r["parent"]["path"]).replace("/", " ").split():
            counts[w] = counts.get(w, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:20]


def main():
    total = 0
    for _ in range(2):
        rows = records(45000)
        text = json.dumps(rows)
        back = json.loads(text)
        total += len(text) + len(back)
        total += sum(len(v) for v in group(back).values())
        total += len(words(back))
        pairs = [(r["score"], r["name"]) for r in back if r["score"] > 50]
        pairs.sort()
        total += len(pairs) + len({p[1][:6] for p in pairs})
    print("total", total)


main()
