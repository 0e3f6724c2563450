package xz

// An xz block's check is the CRC-32 of its plain bytes. A caller that holds the CRC-32 of
// each piece already (each gzip member ends with the CRC-32 of its data) combines them with
// CRC32Combine instead of hashing the whole again, as zlib's crc32_combine does (the Go
// standard library has no combine): the CRC of A followed by B is the CRC of A multiplied
// by x^(8·len(B)) modulo the polynomial, plus the CRC of B. The arithmetic is zlib's, in
// the reflected bit order of hash/crc32.IEEE.

// crcIEEEPoly is the reflected IEEE polynomial (crc32.IEEE).
const crcIEEEPoly = 0xedb88320

// x2nTable[k] is x^(2^k) modulo the polynomial.
var x2nTable = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	t[0] = p
	for k := 1; k < len(t); k++ {
		p = multModP(p, p)
		t[k] = p
	}
	return t
}()

// multModP returns a(x)·b(x) modulo the polynomial. a must not be zero.
func multModP(a, b uint32) uint32 {
	m, p := uint32(1)<<31, uint32(0)
	for {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				return p
			}
		}
		m >>= 1
		if b&1 != 0 {
			b = b>>1 ^ crcIEEEPoly
		} else {
			b >>= 1
		}
	}
}

// x8nModP returns x^(8·n) modulo the polynomial.
func x8nModP(n uint64) uint32 {
	p, k := uint32(1)<<31, 3 // x^0; 8 = 2^3
	for ; n != 0; n >>= 1 {
		if n&1 != 0 {
			p = multModP(x2nTable[k&31], p)
		}
		k++
	}
	return p
}

// CRC32Combine returns the CRC-32 (IEEE) of A followed by B, from the CRC of A, the CRC
// of B and the length of B.
func CRC32Combine(crcA, crcB uint32, lenB uint64) uint32 {
	return multModP(x8nModP(lenB), crcA) ^ crcB
}
