package jose

import "math/big"

// ROCA (CVE-2017-15361): Infineon's RSALib made primes of the form
// k·M + (65537^a mod M), with M the product of the first small primes, so
// every modulus it produced is, modulo each of those primes, a power of
// 65537. Such keys can be factored. The test below is the published
// fingerprint: a random modulus passes all 38 residue checks with negligible
// probability (below 2^-100).
var rocaPrimes = [...]uint32{3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71,
	73, 79, 83, 89, 97, 101, 103, 107, 109, 113, 127, 131, 137, 139, 149, 151, 157, 163, 167}

// rocaPowers[i] has bit r set when r is a power of 65537 modulo rocaPrimes[i].
var rocaPowers = func() (out [len(rocaPrimes)][3]uint64) {
	for i, p := range rocaPrimes {
		g := uint32(65537 % p)
		x := uint32(1)
		for {
			out[i][x/64] |= 1 << (x % 64)
			x = x * g % p
			if x == 1 {
				break
			}
		}
	}
	return out
}()

func isROCA(n *big.Int) bool {
	var m big.Int
	for i, p := range rocaPrimes {
		r := m.Mod(n, big.NewInt(int64(p))).Uint64()
		if rocaPowers[i][r/64]&(1<<(r%64)) == 0 {
			return false
		}
	}
	return true
}
