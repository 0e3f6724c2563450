package xz

// An LZMA2 encoder with an optimal parser, for the xz block of Packages.xz. Packages text
// owes most of what xz -6 gains over a greedy encoder to optimal parsing: every position
// of a window of up to 4096 bytes is reached by the cheapest sequence of literals, matches
// and repeated matches, priced with the coder's current probabilities, as liblzma's
// normal mode does (without its literal-after-match shortcuts). The match finder is a
// hash chain over 4-byte prefixes plus a table of 3-byte ones. The whole input is in
// memory, so the dictionary is the input itself. Output is a function of the input only.
//
// The format is LZMA2 (https://tukaani.org/xz/xz-file-format.txt and liblzma): chunks of
// at most 2 MiB of input and 64 KiB of range-coded output, the first of a stream resetting
// the dictionary and state and giving the properties, the first of each later call's
// output resetting the state only, the others continuing them, then an end marker.

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"sync"
)

// The LZMA properties: 4 literal context bits, no literal or match position bits. Without
// position bits a chunk's LZMA2 data does not depend on its offset in the stream (which an
// insertion shifts by any amount); docs/benchmarks.md has the measurements that chose lc=4
// and DefaultEffort. Then the longest match and the hash table size of the match finder.
const (
	lzmaLC, lzmaLP, lzmaPB = 4, 0, 0
	lzMaxLen               = 273
	lzHashBits             = 16
)

// Props is the LZMA properties byte of the data EncodeLZMA2 writes.
const Props = (lzmaPB*5+lzmaLP)*9 + lzmaLC

type lzOp struct {
	kind int // 0 lit, 1 shortrep, 2 rep, 3 lzMatch
	back uint32
	len  int
}

type lzEncoder struct {
	data  []byte
	state int
	reps  [4]uint32
	m     lzModel
	rc    lzRangeEnc

	// matcher
	head  []int32
	head3 []int32
	chain []int32
	ins   int // next position to insert
	depth int
	nice  int

	// prices
	lenPrices, repLenPrices [16][272]uint32
	slotPrices              [4][64]uint32
	distPrices              [4][128]uint32
	alignPrices             [16]uint32
	sincePrices             int

	matches []lzMatch
	opt     []lzNode
	ops     []lzOp // the ops of the window parse returned last
}

type lzMatch struct {
	len  int
	dist uint32 // distance - 1
}

type lzNode struct {
	price uint32
	prev  int32
	o     lzOp
	state int
	reps  [4]uint32
}

// encoders keeps lzEncoders between calls of EncodeLZMA2: a first build compresses an
// index chunk by chunk, each call with about 1.5 MiB of tables, and memory the process
// touches anew costs a page fault a page.
var encoders = sync.Pool{New: func() any { return &lzEncoder{} }}

// newLZEncoder returns an encoder for data, as fresh as a new one: every table it reads
// before writing is set again here. The hash chain is not: insertTo writes each position's
// link before find can reach it.
func newLZEncoder(data []byte, depth, nice int) *lzEncoder {
	e := encoders.Get().(*lzEncoder)
	*e = lzEncoder{
		data: data, depth: depth, nice: nice,
		head: e.head, head3: e.head3, chain: e.chain, m: lzModel{lit: e.m.lit},
		rc: lzRangeEnc{out: e.rc.out[:0]}, matches: e.matches[:0], opt: e.opt, ops: e.ops[:0],
	}
	if e.head == nil {
		e.head, e.head3 = make([]int32, 1<<lzHashBits), make([]int32, 1<<12)
		e.opt = make([]lzNode, 4096+lzMaxLen+1)
	}
	for i := range e.head {
		e.head[i] = -1
	}
	for i := range e.head3 {
		e.head3[i] = -1
	}
	if cap(e.chain) < len(data) {
		e.chain = make([]int32, len(data))
	}
	e.chain = e.chain[:len(data)]
	e.m.init()
	return e
}

// release returns e to encoders, without its data.
func (e *lzEncoder) release() {
	e.data = nil
	encoders.Put(e)
}

func lzHash4(b []byte) uint32 {
	return (binary.LittleEndian.Uint32(b) * 2654435761) >> (32 - lzHashBits)
}
func lzHash3(b []byte) uint32 {
	return ((uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16) * 506832829) >> (32 - 12)
}

func (e *lzEncoder) insertTo(pos int) {
	for ; e.ins < pos; e.ins++ {
		if e.ins+4 > len(e.data) {
			continue
		}
		h := lzHash4(e.data[e.ins:])
		e.chain[e.ins] = e.head[h]
		e.head[h] = int32(e.ins)
		e.head3[lzHash3(e.data[e.ins:])] = int32(e.ins)
	}
}

// lzMatchLen returns how many bytes, up to max, d[a:] and d[b:] have in common.
func lzMatchLen(d []byte, a, b, max int) int {
	n := 0
	for n+8 <= max {
		x := binary.LittleEndian.Uint64(d[a+n:]) ^ binary.LittleEndian.Uint64(d[b+n:])
		if x != 0 {
			return n + bits.TrailingZeros64(x)/8
		}
		n += 8
	}
	for n < max && d[a+n] == d[b+n] {
		n++
	}
	return n
}

// find returns matches at pos with increasing lengths.
func (e *lzEncoder) find(pos int) []lzMatch {
	e.insertTo(pos)
	ms := e.matches[:0]
	avail := min(len(e.data)-pos, lzMaxLen)
	if avail < 2 {
		return ms
	}
	best := 1
	if avail >= 3 {
		if c := int(e.head3[lzHash3(e.data[pos:])]); c >= 0 && c < pos && pos-c <= 1<<16 {
			if l := lzMatchLen(e.data, c, pos, avail); l > best {
				best = l
				ms = append(ms, lzMatch{l, uint32(pos - c - 1)})
			}
		}
	}
	if avail >= 4 && best < e.nice && best < avail {
		c := int(e.head[lzHash4(e.data[pos:])])
		for d := 0; c >= 0 && d < e.depth; d++ {
			if e.data[c+best] == e.data[pos+best] {
				if l := lzMatchLen(e.data, c, pos, avail); l > best {
					best = l
					ms = append(ms, lzMatch{l, uint32(pos - c - 1)})
					if l >= e.nice || l == avail {
						break
					}
				}
			}
			c = int(e.chain[c])
		}
	}
	e.matches = ms
	return ms
}

func (e *lzEncoder) updatePrices() {
	for ps := range 1 << lzmaPB {
		for v := range 272 {
			e.lenPrices[ps][v] = lzLenPrice(&e.m.lenM, uint32(v), ps)
			e.repLenPrices[ps][v] = lzLenPrice(&e.m.repLenM, uint32(v), ps)
		}
	}
	for ls := range 4 {
		for s := range 64 {
			p := lzTreePrice(e.m.posSlot[ls][:], 6, uint32(s))
			if s >= 14 {
				p += uint32((s>>1)-1-4) << 4
			}
			e.slotPrices[ls][s] = p
		}
		for d := range 128 {
			s := lzDistSlot(uint32(d))
			p := e.slotPrices[ls][s]
			if s >= 4 {
				fb := int(s>>1) - 1
				base := (2 | s&1) << fb
				p += lzReversePrice(e.m.posSpecial[:], int(base)-int(s)-1, fb, uint32(d)-base)
			}
			e.distPrices[ls][d] = p
		}
	}
	for i := range 16 {
		e.alignPrices[i] = lzReversePrice(e.m.align[:], 0, 4, uint32(i))
	}
}

func lzLenPrice(l *lzLenModel, v uint32, ps int) uint32 {
	switch {
	case v < 8:
		return lzBitPrice(l.choice, 0) + lzTreePrice(l.low[ps][:], 3, v)
	case v < 16:
		return lzBitPrice(l.choice, 1) + lzBitPrice(l.choice2, 0) + lzTreePrice(l.mid[ps][:], 3, v-8)
	}
	return lzBitPrice(l.choice, 1) + lzBitPrice(l.choice2, 1) + lzTreePrice(l.high[:], 8, v-16)
}

func (e *lzEncoder) litPrice(pos, state int, rep0 uint32) uint32 {
	ps := pos & (1<<lzmaPB - 1)
	price := lzBitPrice(e.m.isMatch[state][ps], 0)
	var prev byte
	if pos > 0 {
		prev = e.data[pos-1]
	}
	base := 0x300 * (((pos & (1<<lzmaLP - 1)) << lzmaLC) + int(prev>>(8-lzmaLC)))
	probs := e.m.lit[base : base+0x300]
	sym := uint32(e.data[pos]) | 0x100
	if state < 7 {
		m := uint32(1)
		for i := 7; i >= 0; i-- {
			b := (sym >> i) & 1
			price += lzBitPrice(probs[m], b)
			m = m<<1 | b
		}
		return price
	}
	mb := uint32(e.data[pos-int(rep0)-1])
	offset := uint32(0x100)
	for sym < 1<<16 {
		mb <<= 1
		mbit := mb & offset
		idx := offset + mbit + (sym >> 8)
		b := (sym >> 7) & 1
		price += lzBitPrice(probs[idx], b)
		sym <<= 1
		offset &= ^(mb ^ sym)
	}
	return price
}

func (e *lzEncoder) distPrice(d uint32, l int) uint32 {
	ls := min(l-2, 3)
	if d < 128 {
		return e.distPrices[ls][d]
	}
	return e.slotPrices[ls][lzDistSlot(d)] + e.alignPrices[d&15]
}

func (e *lzEncoder) repGPrice(r int, state, ps int) uint32 {
	m := &e.m
	switch r {
	case 0:
		return lzBitPrice(m.isRepG0[state], 0) + lzBitPrice(m.isRep0Long[state][ps], 1)
	case 1:
		return lzBitPrice(m.isRepG0[state], 1) + lzBitPrice(m.isRepG1[state], 0)
	case 2:
		return lzBitPrice(m.isRepG0[state], 1) + lzBitPrice(m.isRepG1[state], 1) + lzBitPrice(m.isRepG2[state], 0)
	}
	return lzBitPrice(m.isRepG0[state], 1) + lzBitPrice(m.isRepG1[state], 1) + lzBitPrice(m.isRepG2[state], 1)
}

const lzInf = ^uint32(0)

// lzPriceEvery is how many bytes are encoded between two updates of the price tables.
const lzPriceEvery = 4096

// parse returns the ops of one window starting at pos.
func (e *lzEncoder) parse(pos int) []lzOp {
	opt := e.opt
	opt[0] = lzNode{price: 0, state: e.state, reps: e.reps}
	limit := min(4096, len(e.data)-pos)
	end := 0
	stop := -1
	for i := 0; ; i++ {
		if i > 0 {
			opt[i].follow(&opt[opt[i].prev])
			if i == end || i >= limit {
				stop = i
				break
			}
		}
		cur := pos + i
		n := &opt[i]
		st := n.state
		ps := cur & (1<<lzmaPB - 1)
		base := n.price
		relax := func(j int, price uint32, o lzOp) {
			for end < j {
				end++
				opt[end].price = lzInf
			}
			if price < opt[j].price {
				opt[j] = lzNode{price: price, prev: int32(i), o: o}
			}
		}
		// literal
		relax(i+1, base+e.litPrice(cur, st, n.reps[0]), lzOp{kind: 0, len: 1})
		avail := min(len(e.data)-cur, lzMaxLen)
		matchP := base + lzBitPrice(e.m.isMatch[st][ps], 1)
		repP := matchP + lzBitPrice(e.m.isRep[st], 1)
		if int(n.reps[0]) < cur && e.data[cur] == e.data[cur-int(n.reps[0])-1] {
			relax(i+1, repP+lzBitPrice(e.m.isRepG0[st], 0)+lzBitPrice(e.m.isRep0Long[st][ps], 0), lzOp{kind: 1, len: 1})
		}
		forced := 0
		for r := range 4 {
			d := int(n.reps[r]) + 1
			if d > cur || avail < 2 {
				continue
			}
			l := lzMatchLen(e.data, cur-d, cur, avail)
			if l < 2 {
				continue
			}
			gp := repP + e.repGPrice(r, st, ps)
			for k := 2; k <= l; k++ {
				relax(i+k, gp+e.repLenPrices[ps][k-2], lzOp{kind: 2, back: uint32(r), len: k})
			}
			if l >= e.nice && l > forced {
				forced = l
			}
		}
		if forced == 0 {
			ms := e.find(cur)
			nm := matchP + lzBitPrice(e.m.isRep[st], 0)
			from := 2
			for _, m := range ms {
				for k := from; k <= m.len; k++ {
					relax(i+k, nm+e.lenPrices[ps][k-2]+e.distPrice(m.dist, k), lzOp{kind: 3, back: m.dist, len: k})
				}
				from = m.len + 1
			}
			if len(ms) > 0 && ms[len(ms)-1].len >= e.nice {
				forced = ms[len(ms)-1].len
			}
		}
		if forced > 0 {
			stop = i + forced
			// lzFill lzNode stop's state is not needed for backtracking
			break
		}
	}
	e.ops = backtrack(e.ops[:0], opt, stop)
	return e.ops
}

// follow sets the coder's state and repeated distances at n, reached from p by n.o.
func (n *lzNode) follow(p *lzNode) {
	n.reps = p.reps
	switch n.o.kind {
	case 0:
		n.state = lzLitNext(p.state)
	case 1:
		n.state = lzShortRepNext(p.state)
	case 2:
		n.state = lzRepNext(p.state)
		r := n.o.back
		d := n.reps[r]
		copy(n.reps[1:r+1], p.reps[:r])
		n.reps[0] = d
	case 3:
		n.state = lzMatchNext(p.state)
		n.reps = [4]uint32{n.o.back, p.reps[0], p.reps[1], p.reps[2]}
	}
}

// backtrack appends to ops the ops of the cheapest path to opt[stop], first to last.
func backtrack(ops []lzOp, opt []lzNode, stop int) []lzOp {
	for j := stop; j > 0; j = int(opt[j].prev) {
		ops = append(ops, opt[j].o)
	}
	slices.Reverse(ops)
	return ops
}

// encode writes o at e.pos.
func (e *lzEncoder) encode(pos int, o lzOp) {
	r := &e.rc
	m := &e.m
	st := e.state
	ps := pos & (1<<lzmaPB - 1)
	switch o.kind {
	case 0:
		r.bit(&m.isMatch[st][ps], 0)
		var prev byte
		if pos > 0 {
			prev = e.data[pos-1]
		}
		base := 0x300 * (((pos & (1<<lzmaLP - 1)) << lzmaLC) + int(prev>>(8-lzmaLC)))
		probs := m.lit[base : base+0x300]
		sym := uint32(e.data[pos]) | 0x100
		if st < 7 {
			r.tree(probs, 8, sym&0xFF)
		} else {
			mb := uint32(e.data[pos-int(e.reps[0])-1])
			offset := uint32(0x100)
			for sym < 1<<16 {
				mb <<= 1
				mbit := mb & offset
				idx := offset + mbit + (sym >> 8)
				b := (sym >> 7) & 1
				r.bit(&probs[idx], b)
				sym <<= 1
				offset &= ^(mb ^ sym)
			}
		}
		e.state = lzLitNext(st)
	case 1:
		r.bit(&m.isMatch[st][ps], 1)
		r.bit(&m.isRep[st], 1)
		r.bit(&m.isRepG0[st], 0)
		r.bit(&m.isRep0Long[st][ps], 0)
		e.state = lzShortRepNext(st)
	case 2:
		r.bit(&m.isMatch[st][ps], 1)
		r.bit(&m.isRep[st], 1)
		g := o.back
		if g == 0 {
			r.bit(&m.isRepG0[st], 0)
			r.bit(&m.isRep0Long[st][ps], 1)
		} else {
			r.bit(&m.isRepG0[st], 1)
			if g == 1 {
				r.bit(&m.isRepG1[st], 0)
			} else {
				r.bit(&m.isRepG1[st], 1)
				r.bit(&m.isRepG2[st], g-2)
			}
			d := e.reps[g]
			copy(e.reps[1:g+1], e.reps[:g])
			e.reps[0] = d
		}
		r.encLen(&m.repLenM, uint32(o.len-2), ps)
		e.state = lzRepNext(st)
	case 3:
		r.bit(&m.isMatch[st][ps], 1)
		r.bit(&m.isRep[st], 0)
		r.encLen(&m.lenM, uint32(o.len-2), ps)
		d := o.back
		s := lzDistSlot(d)
		r.tree(m.posSlot[min(o.len-2, 3)][:], 6, s)
		if s >= 4 {
			fb := int(s>>1) - 1
			base := (2 | s&1) << fb
			red := d - base
			if s < 14 {
				r.reverse(m.posSpecial[:], int(base)-int(s)-1, fb, red)
			} else {
				r.direct(red>>4, fb-4)
				r.reverse(m.align[:], 0, 4, red&15)
			}
		}
		e.reps = [4]uint32{d, e.reps[0], e.reps[1], e.reps[2]}
		e.state = lzMatchNext(st)
	}
}

// Effort bounds the match finder: it looks at Depth candidates per position, and stops
// at a match of Nice bytes. More of either compresses better and slower.
type Effort struct{ Depth, Nice int }

// DefaultEffort is the effort armor compresses Packages.xz with (docs/benchmarks.md has
// the measurements behind it).
var DefaultEffort = Effort{Depth: 16, Nice: 32}

// EncodeLZMA2 returns the LZMA2 chunks (without an end marker) of data[start:]
// compressed with data[:start] as the dictionary already decoded: matches may refer back
// into it, and into nothing before it. With start 0 the first chunk resets the dictionary
// and gives the properties (control byte 0xe0, then Props); otherwise it resets the state
// only (0xa0), so the output depends on data alone, not on what the decoder saw before
// data[:start]. The LZMA position bits are 0, so neither does it depend on where data sits
// in the stream: the outputs of several calls can follow one another in one block, each
// call's data continuing the one before. The output is a function of its arguments only.
func EncodeLZMA2(data []byte, start int, eff Effort) []byte {
	e := newLZEncoder(data, eff.Depth, eff.Nice)
	defer e.release()
	var out []byte
	pos := start
	first := true
	var pending []lzOp
	e.updatePrices()
	for pos < len(data) {
		e.rc.reset()
		from := pos
		for pos < len(data) && e.rc.pending() < 65536-256 && pos-from < 1<<21-lzMaxLen*2 {
			if len(pending) == 0 {
				if e.sincePrices >= lzPriceEvery {
					e.updatePrices()
					e.sincePrices = 0
				}
				pending = e.parse(pos)
			}
			o := pending[0]
			pending = pending[1:]
			e.encode(pos, o)
			pos += o.len
			e.sincePrices += o.len
		}
		e.rc.flush()
		unc, comp := pos-from-1, len(e.rc.out)-1
		if comp > 0xFFFF {
			panic("chunk too large")
		}
		ctl := byte(0x80)
		switch {
		case first && start == 0:
			ctl = 0xE0
		case first:
			ctl = 0xA0
		}
		out = append(out, ctl|byte(unc>>16), byte(unc>>8), byte(unc), byte(comp>>8), byte(comp))
		if ctl == 0xE0 {
			out = append(out, Props)
		}
		first = false
		out = append(out, e.rc.out...)
	}
	return out
}
