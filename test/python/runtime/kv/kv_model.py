"""A deliberately naive reference model of the KV allocator (spec T72).

It implements spec kv-allocator.md §4.3/§4.4 literally, plus the decisions
runtime/src/kv/README.md records, and therefore predicts EXACT block ids:

* ``free``: one Python list per tier in spec order (I9): FREE blocks first
  (released unsealed blocks pushed at the head), then CACHED blocks in
  release order; allocation pops the front; O(n) removal.
* ``ref``: dict block -> reference count; ``key``: dict block -> its hash
  key while sealed; ``index``: dict key -> blocks in sealing order (a lookup
  takes the oldest, as the C++ index's probe order does).
* ``seqs``: dict id -> Seq(tokens, table, state, host_table).

A chained hash is modelled by its meaning: the key of block j is
(namespace, tokens[0 : (j+1)·bs]). STREAM_ORDERED copies, no watermark, no
reservations (`reserve` is not modelled). Errors are returned as
``("Error", code)`` tuples, or ``("Error", code, payload)`` for
OutOfBlocks / HostTierFull.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FREE, CACHED, ACTIVE = "FREE", "CACHED", "ACTIVE"


class Fail(Exception):
    def __init__(self, code, *payload):
        self.result = ("Error", code, *payload)


@dataclass
class Seq:
    tokens: list
    ns: str
    table: list = field(default_factory=list)
    state: str = "ACTIVE"
    host_table: list = field(default_factory=list)


class Tier:
    def __init__(self, first: int, n: int):
        self.free = list(range(first, n))
        self.state = {b: FREE for b in range(first, n)}
        self.ref = {b: 0 for b in range(first, n)}
        self.filled = {b: 0 for b in range(first, n)}
        self.key = {}
        self.index = {}

    def count(self, st):
        return sum(1 for s in self.state.values() if s == st)

    def find(self, key):
        return self.index[key][0] if self.index.get(key) else None

    def seal(self, b, key):
        self.key[b] = key
        self.index.setdefault(key, []).append(b)

    def unseal(self, b):
        self.index[self.key.pop(b)].remove(b)

    def release_to_list(self, b, cache):
        """ref reached 0: CACHED at the tail if sealed (and caching), else
        FREE at the head (LIFO)."""
        if b in self.key and cache:
            self.state[b] = CACHED
            self.free.append(b)
        else:
            self.state[b] = FREE
            self.free.insert(0, b)


class Model:
    def __init__(self, num_blocks, block_size, num_host_blocks, caching):
        self.bs, self.caching = block_size, caching
        self.usable = num_blocks - 1
        self.dev, self.host = Tier(1, num_blocks), Tier(0, num_host_blocks)
        self.has_host = num_host_blocks > 0
        self.seqs: dict[int, Seq] = {}
        self.pending, self.epoch = [], 0
        self.onboarding = set()  # host hits being onboarded: not offload targets
        self.c = dict.fromkeys(
            "blocks_allocated blocks_released sequences_added sequences_freed forks "
            "cow_copies prefix_queries prefix_query_tokens prefix_hit_tokens lookups "
            "evictions offloads onboards swapped_out_blocks swapped_in_blocks "
            "peak_active_blocks out_of_blocks_failures failed_calls".split(), 0)

    def blocks(self, n):
        return -(-n // self.bs)

    def keyof(self, s, j):
        return (s.ns, tuple(s.tokens[:(j + 1) * self.bs]))

    def copy(self, st, src, dt, dst, tokens):
        self.pending.append((self.epoch, st, src, dt, dst, tokens))

    def call(self, fn, *args):
        """Runs an operation: its result, or ("Error", code, ...) after
        counting the failure (an error changes nothing else)."""
        try:
            return fn(*args)
        except Fail as f:
            self.c["failed_calls"] += 1
            self.c["out_of_blocks_failures"] += f.result[1] == "OutOfBlocks"
            return f.result

    def live(self, seq, active=True):
        if seq not in self.seqs:
            raise Fail("UnknownSequence")
        if active and self.seqs[seq].state == "SWAPPED":
            raise Fail("InvalidState")
        return self.seqs[seq]

    def need(self, needed, cached_hits=0):
        available = len(self.dev.free) - cached_hits
        if needed > available:
            raise Fail("OutOfBlocks", needed, available, self.dev.count(CACHED) - cached_hits)

    # --- block primitives ---------------------------------------------------------

    def take_host(self, skip=()):
        for h in self.host.free:
            if self.host.state[h] == FREE or h not in skip:
                self.host.free.remove(h)
                if h in self.host.key:
                    self.host.unseal(h)
                return h
        return None

    def drop_victim(self, b):
        """A CACHED device block loses its hash: copied to the host tier
        first (O11) unless the host already holds that content."""
        if self.has_host and self.host.find(self.dev.key[b]) is None:
            h = self.take_host(skip=self.onboarding)
            if h is not None:
                self.copy("device", b, "host", h, self.bs)
                self.host.state[h], self.host.filled[h] = CACHED, self.bs
                self.host.seal(h, self.dev.key[b])
                self.host.free.append(h)
                self.c["offloads"] += 1
        self.dev.unseal(b)
        self.c["evictions"] += 1

    def take_device(self, fill=0):
        """Allocation: the free-list front (FREE blocks, then the LRU)."""
        b = self.dev.free.pop(0)
        if self.dev.state[b] == CACHED:
            self.drop_victim(b)
        self.dev.state[b], self.dev.ref[b], self.dev.filled[b] = ACTIVE, 1, fill
        self.c["blocks_allocated"] += 1
        self.bump_peak()
        return b

    def bump_peak(self):
        self.c["peak_active_blocks"] = max(self.c["peak_active_blocks"], self.dev.count(ACTIVE))

    def unref(self, b):
        self.dev.ref[b] -= 1
        if self.dev.ref[b] == 0:
            self.c["blocks_released"] += 1
            self.dev.release_to_list(b, self.caching)

    def unref_host(self, h):
        self.host.ref[h] = 0
        self.host.release_to_list(h, self.caching)

    def lookup(self, s, n):
        """Hit plan: per full block below the cap (n - 1 tokens), the device
        block or ("host", block) holding its key; stops at the first miss."""
        plan = []
        for j in range(max(n - 1, 0) // self.bs if self.caching else 0):
            key = self.keyof(s, j)
            if self.dev.find(key) is not None:
                plan.append(self.dev.find(key))
            elif self.has_host and self.host.find(key) is not None:
                plan.append(("host", self.host.find(key)))
            else:
                break
        return plan

    # --- operations (spec O1-O13) ----------------------------------------------------

    def add(self, seq, tokens, ns=""):
        n = len(tokens)
        if self.blocks(n) > self.usable:
            raise Fail("CapacityExceeded")
        if seq in self.seqs:
            raise Fail("SequenceExists")
        s = Seq(list(tokens), ns)
        plan = self.lookup(s, n)
        dev_hits = [b for b in plan if not isinstance(b, tuple)]
        cached_hits = sum(self.dev.state[b] == CACHED for b in dev_hits)
        self.need(self.blocks(n) - len(dev_hits), cached_hits)
        start = len(self.pending)
        for b in dev_hits:  # prefix hits ("Reusing" a CACHED block)
            if self.dev.state[b] == CACHED:
                self.dev.free.remove(b)
                self.dev.state[b], self.dev.ref[b] = ACTIVE, 1
                self.bump_peak()
            else:
                self.dev.ref[b] += 1
        self.onboarding = {p[1] for p in plan if isinstance(p, tuple)}
        for p in plan:
            if isinstance(p, tuple):  # host hit: onboard into a new device block
                d = self.take_device(self.bs)
                self.copy("host", p[1], "device", d, self.bs)
                self.dev.seal(d, self.host.key[p[1]])
                self.c["onboards"] += 1
                p = d
            s.table.append(p)
        self.onboarding = set()
        for j in range(len(plan), self.blocks(n)):
            s.table.append(self.take_device(min(self.bs, n - j * self.bs)))
        for j in range(len(plan), n // self.bs if self.caching else 0):
            self.dev.seal(s.table[j], self.keyof(s, j))
        self.seqs[seq] = s
        self.c["sequences_added"] += 1
        if self.caching:
            self.c["prefix_queries"] += 1
            self.c["prefix_query_tokens"] += n
            self.c["prefix_hit_tokens"] += len(plan) * self.bs
        return (len(plan) * self.bs, list(s.table), self.blocks(n) - len(dev_hits),
                len(plan) - len(dev_hits), self.pending[start:])

    def writable(self, b):
        return self.dev.ref[b] == 1 and b not in self.dev.key

    def append(self, seq, tokens):
        s = self.live(seq)
        n, k = len(s.tokens), len(tokens)
        if self.blocks(n + k) > self.usable:
            raise Fail("CapacityExceeded")
        if k == 0:
            return ([], [])
        cow = n % self.bs != 0 and not self.writable(s.table[n // self.bs])
        grow = self.blocks(n + k) - len(s.table)
        self.need(cow + grow)
        start, new = len(self.pending), []
        if cow:  # copy-on-write: new block, copy, then unref the old one
            j, old = n // self.bs, s.table[n // self.bs]
            d = self.take_device(n % self.bs)
            self.copy("device", old, "device", d, n % self.bs)
            s.table[j] = d
            self.unref(old)
            self.c["cow_copies"] += 1
            new.append(d)
        for _ in range(grow):
            s.table.append(self.take_device())
            new.append(s.table[-1])
        s.tokens += list(tokens)
        for j in range(n // self.bs, self.blocks(n + k)):
            b = s.table[j]
            self.dev.filled[b] = max(self.dev.filled[b], min(self.bs, n + k - j * self.bs))
            if self.caching and (j + 1) * self.bs <= n + k:
                self.dev.seal(b, self.keyof(s, j))
        return (new, self.pending[start:])

    def fork(self, parent, child, pos):
        if pos < -1:
            raise Fail("InvalidArgument")
        p = self.live(parent)
        at = len(p.tokens) if pos == -1 else pos
        if at > len(p.tokens):
            raise Fail("InvalidArgument")
        if child in self.seqs:
            raise Fail("SequenceExists")
        c = Seq(p.tokens[:at], p.ns, p.table[:self.blocks(at)])
        for b in c.table:
            self.dev.ref[b] += 1
        self.seqs[child] = c
        self.c["forks"] += 1
        self.c["sequences_added"] += 1

    def truncate(self, seq, new_n):
        if new_n < 0:
            raise Fail("InvalidArgument")
        s = self.live(seq)
        if new_n > len(s.tokens):
            raise Fail("InvalidArgument")
        while len(s.table) > self.blocks(new_n):
            self.unref(s.table.pop())
        if new_n % self.bs and self.writable(s.table[-1]):
            self.dev.filled[s.table[-1]] = new_n % self.bs
        del s.tokens[new_n:]

    def free(self, seq):
        s = self.live(seq, active=False)
        for j in reversed(range(len(s.table))):
            if s.state == "SWAPPED" and s.host_table[j] is not None:
                self.unref_host(s.host_table[j])
            else:
                self.unref(s.table[j])
        del self.seqs[seq]
        self.c["sequences_freed"] += 1

    def swap_out(self, seq):
        s = self.live(seq, active=False)
        if not self.has_host:
            raise Fail("InvalidState")
        if s.state == "SWAPPED":
            raise Fail("InvalidState")
        mine = [j for j, b in enumerate(s.table) if self.dev.ref[b] == 1]
        if len(mine) > len(self.host.free):
            raise Fail("HostTierFull", len(mine), len(self.host.free))
        s.host_table = [None] * len(s.table)
        for j in mine:  # front to back: a host block and a D2H copy each
            b, h = s.table[j], self.take_host()
            valid = self.bs if b in self.dev.key else min(self.bs, len(s.tokens) - j * self.bs)
            self.copy("device", b, "host", h, valid)
            self.host.state[h], self.host.ref[h], self.host.filled[h] = ACTIVE, 1, valid
            if b in self.dev.key:  # the hash moves with the content
                self.host.seal(h, self.dev.key[b])
                self.dev.unseal(b)
            s.host_table[j] = h
        for j in reversed(mine):
            self.unref(s.table[j])
            s.table[j] = None
        s.state = "SWAPPED"
        self.c["swapped_out_blocks"] += len(mine)

    def swap_in(self, seq):
        s = self.live(seq, active=False)
        if not self.has_host or s.state != "SWAPPED":
            raise Fail("InvalidState")
        moved = [j for j, h in enumerate(s.host_table) if h is not None]
        self.need(len(moved))
        for j in moved:
            h = s.host_table[j]
            d = self.take_device(self.host.filled[h])
            self.copy("host", h, "device", d, self.host.filled[h])
            if h in self.host.key:
                self.dev.seal(d, self.host.key[h])
            s.table[j] = d
        for j in reversed(moved):
            self.unref_host(s.host_table[j])
        s.host_table, s.state = [], "ACTIVE"
        self.c["swapped_in_blocks"] += len(moved)

    def evict(self, k):
        done = 0
        while done < k and self.dev.count(CACHED):
            # The LRU head loses its hash like a victim and stays where it
            # is: now the last FREE block.
            b = self.dev.free[len(self.dev.free) - self.dev.count(CACHED)]
            self.drop_victim(b)
            self.dev.state[b] = FREE
            done += 1
        return done

    def lookup_prefix(self, tokens, ns=""):
        self.c["lookups"] += 1
        return len(self.lookup(Seq(list(tokens), ns), len(tokens))) * self.bs

    def reset(self):
        if self.dev.count(ACTIVE) or self.host.count(ACTIVE):
            raise Fail("InvalidState")
        self.dev = Tier(1, self.usable + 1)
        self.host = Tier(0, len(self.host.state))

    def take_copies(self):
        out, self.pending = self.pending, []
        self.epoch += 1
        return out

    # --- what the tests compare ----------------------------------------------------------

    def stats(self):
        d, h = self.dev, self.host
        active = d.count(ACTIVE)
        physical = sum(d.filled[b] for b in d.state if d.state[b] == ACTIVE)
        hits, queries = self.c["prefix_hit_tokens"], self.c["prefix_query_tokens"]
        waste = active * self.bs - physical
        out = dict(self.c)
        out.update(
            total_blocks=self.usable + 1, usable_blocks=self.usable,
            free_blocks=d.count(FREE), cached_blocks=d.count(CACHED), active_blocks=active,
            shared_blocks=sum(d.ref[b] > 1 for b in d.state), evicting_blocks=0,
            host_total=len(h.state), host_used=h.count(ACTIVE), host_cached=h.count(CACHED),
            num_sequences=len(self.seqs),
            swapped_sequences=sum(s.state == "SWAPPED" for s in self.seqs.values()),
            utilization=active / self.usable, occupancy=(active + d.count(CACHED)) / self.usable,
            logical_tokens=sum(len(s.tokens) for s in self.seqs.values()),
            physical_tokens=physical, internal_frag_waste_slots=waste,
            waste_pct=100.0 * waste / (active * self.bs) if active else 0.0,
            sharing_factor=sum(len(s.table) for s in self.seqs.values()) / active
            if active else 0.0,
            hit_rate=hits / queries if queries else 0.0)
        return out
