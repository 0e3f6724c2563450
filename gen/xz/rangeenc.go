package xz

import (
	"math"
	"math/bits"
)

// The range coder and the probability models of LZMA, and the prices (in 1/16 bit) that the
// optimal parser compares, computed from the models' current probabilities.

type lzProb = uint16

type lzRangeEnc struct {
	low       uint64
	rng       uint32
	cache     byte
	cacheSize int64
	out       []byte
}

func (r *lzRangeEnc) reset() {
	r.low, r.rng, r.cache, r.cacheSize, r.out = 0, 0xFFFFFFFF, 0, 1, r.out[:0]
}

func (r *lzRangeEnc) shiftLow() {
	if uint32(r.low) < 0xFF000000 || r.low>>32 != 0 {
		carry := byte(r.low >> 32)
		temp := r.cache
		for {
			r.out = append(r.out, temp+carry)
			temp = 0xFF
			r.cacheSize--
			if r.cacheSize == 0 {
				break
			}
		}
		r.cache = byte(uint32(r.low) >> 24)
	}
	r.cacheSize++
	r.low = uint64(uint32(r.low) << 8)
}

func (r *lzRangeEnc) bit(p *lzProb, b uint32) {
	bound := (r.rng >> 11) * uint32(*p)
	if b == 0 {
		r.rng = bound
		*p += (2048 - *p) >> 5
	} else {
		r.low += uint64(bound)
		r.rng -= bound
		*p -= *p >> 5
	}
	for r.rng < 1<<24 {
		r.rng <<= 8
		r.shiftLow()
	}
}

func (r *lzRangeEnc) direct(v uint32, n int) {
	for n > 0 {
		n--
		r.rng >>= 1
		if (v>>n)&1 == 1 {
			r.low += uint64(r.rng)
		}
		for r.rng < 1<<24 {
			r.rng <<= 8
			r.shiftLow()
		}
	}
}

func (r *lzRangeEnc) flush() {
	for range 5 {
		r.shiftLow()
	}
}

func (r *lzRangeEnc) pending() int { return len(r.out) + int(r.cacheSize) + 5 }

func (r *lzRangeEnc) tree(probs []lzProb, n int, sym uint32) {
	m := uint32(1)
	for i := n - 1; i >= 0; i-- {
		b := (sym >> i) & 1
		r.bit(&probs[m], b)
		m = m<<1 | b
	}
}

func (r *lzRangeEnc) reverse(probs []lzProb, off int, n int, sym uint32) {
	m := uint32(1)
	for range n {
		b := sym & 1
		sym >>= 1
		r.bit(&probs[off+int(m)], b)
		m = m<<1 | b
	}
}

type lzLenModel struct {
	choice, choice2 lzProb
	low, mid        [16][8]lzProb
	high            [256]lzProb
}

func (l *lzLenModel) init() {
	l.choice, l.choice2 = 1024, 1024
	for i := range l.low {
		for j := range l.low[i] {
			l.low[i][j], l.mid[i][j] = 1024, 1024
		}
	}
	for i := range l.high {
		l.high[i] = 1024
	}
}

func (r *lzRangeEnc) encLen(l *lzLenModel, v uint32, ps int) {
	switch {
	case v < 8:
		r.bit(&l.choice, 0)
		r.tree(l.low[ps][:], 3, v)
	case v < 16:
		r.bit(&l.choice, 1)
		r.bit(&l.choice2, 0)
		r.tree(l.mid[ps][:], 3, v-8)
	default:
		r.bit(&l.choice, 1)
		r.bit(&l.choice2, 1)
		r.tree(l.high[:], 8, v-16)
	}
}

type lzModel struct {
	isMatch                          [12][16]lzProb
	isRep, isRepG0, isRepG1, isRepG2 [12]lzProb
	isRep0Long                       [12][16]lzProb
	lit                              []lzProb
	posSlot                          [4][64]lzProb
	posSpecial                       [114]lzProb
	align                            [16]lzProb
	lenM, repLenM                    lzLenModel
}

func lzFill(p []lzProb) {
	for i := range p {
		p[i] = 1024
	}
}

func (m *lzModel) init() {
	for i := range 12 {
		lzFill(m.isMatch[i][:])
		lzFill(m.isRep0Long[i][:])
	}
	lzFill(m.isRep[:])
	lzFill(m.isRepG0[:])
	lzFill(m.isRepG1[:])
	lzFill(m.isRepG2[:])
	if m.lit == nil {
		m.lit = make([]lzProb, 0x300<<(lzmaLC+lzmaLP))
	}
	lzFill(m.lit)
	for i := range 4 {
		lzFill(m.posSlot[i][:])
	}
	lzFill(m.posSpecial[:])
	lzFill(m.align[:])
	m.lenM.init()
	m.repLenM.init()
}

// lzPriceTab is the price, in 1/16 bit, of coding a bit whose probability (out of 2048) is
// in each 1/128 of the range: -log2 of the probability in the middle of that range.
var lzPriceTab = func() (t [128]uint32) {
	for i := range t {
		p := (float64(i<<4) + 8) / 2048
		t[i] = uint32(math.Round(-math.Log2(p) * 16))
	}
	return t
}()

func lzBitPrice(p lzProb, b uint32) uint32 {
	return lzPriceTab[(uint32(p)^(-b&0x7FF))>>4]
}

func lzTreePrice(probs []lzProb, n int, sym uint32) uint32 {
	price := uint32(0)
	m := uint32(1)
	for i := n - 1; i >= 0; i-- {
		b := (sym >> i) & 1
		price += lzBitPrice(probs[m], b)
		m = m<<1 | b
	}
	return price
}

func lzReversePrice(probs []lzProb, off, n int, sym uint32) uint32 {
	price := uint32(0)
	m := uint32(1)
	for range n {
		b := sym & 1
		sym >>= 1
		price += lzBitPrice(probs[off+int(m)], b)
		m = m<<1 | b
	}
	return price
}

func lzDistSlot(d uint32) uint32 {
	if d < 4 {
		return d
	}
	n := uint32(bits.Len32(d)) - 1
	return 2*n + (d>>(n-1))&1
}

func lzLitNext(s int) int {
	switch {
	case s < 4:
		return 0
	case s < 10:
		return s - 3
	}
	return s - 6
}
func lzMatchNext(s int) int {
	if s < 7 {
		return 7
	}
	return 10
}
func lzRepNext(s int) int {
	if s < 7 {
		return 8
	}
	return 11
}
func lzShortRepNext(s int) int {
	if s < 7 {
		return 9
	}
	return 11
}
