package transit

import "strconv"

// DefaultMaxBatchCost is a batch's cost budget (Options.MaxBatchCost): about
// 0.4 s of CPU on the machine the costs were measured on. Batches of
// thousands of AEAD or HMAC items fit, or 12,500 ed25519 signatures; 250
// rsa-2048 or 40 rsa-4096 signatures do.
const DefaultMaxBatchCost = 1_000_000

// op is an operation a batch item is charged for.
type op uint8

const (
	opEncrypt op = iota
	opDecrypt
	opSign
	opVerify
	opHMAC
	opRewrap   // a decryption, then an encryption
	opGenerate // a new key or version
	numOps
)

var opNames = [numOps]string{"encrypt", "decrypt", "sign", "verify", "hmac", "rewrap", "generate"}

// costs is what one item of each operation costs, in units of one
// AES-256-GCM encryption of a 64-byte input as text: BenchmarkOpCost's CPU
// times (the median of three runs on a 2-core AMD EPYC, go1.26) over the
// unit's, 398 ns, rounded. Measured: the AEADs and HMAC 0.7 to 1.4;
// ed25519 signing 31 µs (77), verification 66 µs (166); ecdsa-p256 45 and
// 99 µs (112, 249), p384 0.42 and 0.85 ms (1,054, 2,142), p521 1.13 and
// 3.85 ms (2,846, 9,665); rsa-2048 encryption 48 µs (120), decryption 1.52
// ms (3,813), signing 1.58 ms (3,964), verification 57 µs (144); rsa-3072
// 0.28, 3.60, 3.95 and 0.31 ms (710, 9,035, 9,916, 773); rsa-4096 0.41,
// 7.74, 10.0 and 0.56 ms (1,040, 19,445, 25,151, 1,398). RSA private-key
// operations are charged the larger of signing and decryption. The work
// that grows with an input's length (AEAD, hashing) is not charged: the
// request body limit bounds all of it to a few milliseconds.
//
// Generating a key or version (CreateKey, Rotate) was measured the same
// way, RSA over 20 to 40 keys, for its time varies with the search for
// primes: 3 to 4 µs for the AEAD types (10), 2.3 µs for hmac (6), 27 µs
// for ed25519 and ecdsa-p256 (70), 0.19 ms for p384 (480), 0.76 ms for
// p521 (1,900), and 90 ms, 0.37 s and 0.80 s (225,000, 930,000 and
// 2,000,000) for rsa-2048, 3072 and 4096, the single most expensive
// operation there is.
var costs = [maxKeyType][numOps]int64{
	AES128GCM96:       {opEncrypt: 1, opDecrypt: 1, opHMAC: 1, opGenerate: 10},
	AES256GCM96:       {opEncrypt: 1, opDecrypt: 1, opHMAC: 1, opGenerate: 10},
	ChaCha20Poly1305:  {opEncrypt: 1, opDecrypt: 1, opHMAC: 1, opGenerate: 10},
	XChaCha20Poly1305: {opEncrypt: 1, opDecrypt: 1, opHMAC: 1, opGenerate: 10},
	Ed25519:           {opSign: 80, opVerify: 170, opHMAC: 1, opGenerate: 70},
	ECDSAP256:         {opSign: 110, opVerify: 250, opHMAC: 1, opGenerate: 70},
	ECDSAP384:         {opSign: 1_050, opVerify: 2_150, opHMAC: 1, opGenerate: 480},
	ECDSAP521:         {opSign: 2_850, opVerify: 9_700, opHMAC: 1, opGenerate: 1_900},
	RSA2048:           {opEncrypt: 120, opDecrypt: 4_000, opSign: 4_000, opVerify: 150, opHMAC: 1, opGenerate: 225_000},
	RSA3072:           {opEncrypt: 710, opDecrypt: 10_000, opSign: 10_000, opVerify: 770, opHMAC: 1, opGenerate: 930_000},
	RSA4096:           {opEncrypt: 1_050, opDecrypt: 25_000, opSign: 25_000, opVerify: 1_400, opHMAC: 1, opGenerate: 2_000_000},
	HMAC:              {opHMAC: 1, opGenerate: 6},
}

// derivedCost is what deriving a key for a context costs on top (a cache
// miss, which a caller choosing contexts can force): measured at 6.9 µs
// (16 more units) for an AEAD key, 56 µs (140) for an ed25519 one.
var derivedCost = [maxKeyType]int64{
	AES128GCM96: 16, AES256GCM96: 16, ChaCha20Poly1305: 16, XChaCha20Poly1305: 16, Ed25519: 140,
}

// unwrapCost is an import's unwrapping: RSA-OAEP decryption with the
// 4096-bit wrapping key.
var unwrapCost = costs[RSA4096][opDecrypt]

// cost is what one item of o costs with k: at least 1, so that even an
// item that fails at once counts.
func (k *Key) cost(o op) int64 {
	t := k.cfg.Type
	if !t.valid() {
		return 1
	}
	if o == opRewrap {
		return k.cost(opDecrypt) + k.cost(opEncrypt)
	}
	c := costs[t][o]
	if k.cfg.Derived && o != opHMAC && o != opGenerate && c > 0 { // an operation the type lacks derives nothing
		c += derivedCost[t]
	}
	return max(c, 1)
}

// poolCost is the least an operation costs to run on the engine's fair
// worker pool. Every asymmetric operation costs 70 or more (ed25519 and
// ecdsa-p256 key generation; ed25519 signing 80, RSA-2048 encryption 120,
// ed25519 verification 170) and every symmetric one 17 or less (an AEAD
// encryption or decryption with a key derived for a context not in the
// cache; an AEAD key's generation 10). 40, about 16 µs, leaves a factor
// of nearly 2 on either side, so that no remeasurement moves an operation
// across it. Below it an operation is over before a
// waiting goroutine could be woken to take its place, and running it at
// once costs the gateway less than queuing it would; above it, running
// every caller's operations at once on every core is what lets a flood
// of them starve other tenants and /auth.
const poolCost = 40

// pooled reports whether o with k runs on the engine's fair worker pool:
// every asymmetric operation (signing and verification, RSA encryption and
// decryption, the generation of an asymmetric key).
func (k *Key) pooled(o op) bool { return k.cost(o) >= poolCost }

// Waits reports whether encrypting, decrypting or rewrapping with k waits
// for a worker of the pool in the turn of the options' Caller, so that a
// caller costly to learn is learnt only then.
func (k *Key) Waits() bool {
	return k.cfg.Type.isRSA() && (k.pooled(opEncrypt) || k.pooled(opDecrypt))
}

// checkBatch refuses an empty batch, one over MaxBatchItems, and one whose
// n items of o with k cost more than the engine's budget, before any of
// it is done.
func (e *Engine) checkBatch(n int, k *Key, o op) error {
	switch {
	case n == 0:
		return newError(ReasonInvalidRequest, "missing batch input to process")
	case n > MaxBatchItems:
		return errBatchTooLarge
	}
	per := k.cost(o)
	if total := int64(n) * per; total > e.maxCost {
		return newError(ReasonOverBudget, "batch_input of "+strconv.Itoa(n)+" "+k.cfg.Type.String()+" "+opNames[o]+
			" items costs "+strconv.FormatInt(total, 10)+" units ("+strconv.FormatInt(per, 10)+" each), over the limit of "+
			strconv.FormatInt(e.maxCost, 10)+" per request: send at most "+strconv.FormatInt(e.maxCost/per, 10)+" items at once")
	}
	return nil
}
