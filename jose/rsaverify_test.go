package jose

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"sync"
	"testing"
)

// The RSA keys of these tests were made once and kept (Go's rsa.GenerateKey
// ignores its reader, so it cannot make them again deterministically):
// 2048, 3072 and 4096 bits with
//
//	openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:$bits -out testdata/rsa/rsa-$bits.pem
//
// and 2049 bits, which openssl rounds down, with rsa.GenerateKey(rand.Reader,
// 2049) and x509.MarshalPKCS8PrivateKey. 2049 bits is the size where PSS's
// encoding (emBits = modBits-1 = 2048) is one octet shorter than the modulus.
var testRSABits = []int{2048, 2049, 3072, 4096}

var (
	testRSAKeysOnce sync.Once
	testRSAKeys     map[int]*rsa.PrivateKey
	testRSAKeysErr  error
)

func testRSAKey(t testing.TB, bits int) *rsa.PrivateKey {
	t.Helper()
	testRSAKeysOnce.Do(func() {
		testRSAKeys = map[int]*rsa.PrivateKey{}
		for _, b := range testRSABits {
			k, err := readTestRSAKey(fmt.Sprintf("testdata/rsa/rsa-%d.pem", b))
			if err == nil && k.N.BitLen() != b {
				err = fmt.Errorf("rsa-%d.pem holds a %d-bit key", b, k.N.BitLen())
			}
			if err != nil {
				testRSAKeysErr = err
				return
			}
			testRSAKeys[b] = k
		}
	})
	if testRSAKeysErr != nil {
		t.Fatal(testRSAKeysErr)
	}
	return testRSAKeys[bits]
}

func readTestRSAKey(path string) (*rsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: %T, not RSA", path, k)
	}
	return rk, nil
}
