package rootkey_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/keygate/keygate/internal/rootkey"
)

func Example() {
	root, err := rootkey.Generate(nil) // in production: a key file, KeyEnv or a passphrase
	if err != nil {
		log.Fatal(err)
	}
	k, err := rootkey.New(rootkey.Options{Root: root})
	root.Destroy() // the keyring keeps its own copy
	if err != nil {
		log.Fatal(err)
	}

	aad := []byte("signing-key:2026-01") // the record the ciphertext belongs to
	ct, err := k.Encrypt([]byte("-----BEGIN PRIVATE KEY-----..."), aad)
	if err != nil {
		log.Fatal(err)
	}
	pt, err := k.Decrypt(ct, aad)
	fmt.Printf("%s %v\n", pt, err)

	// Moved to another record, it does not decrypt.
	_, err = k.Decrypt(ct, []byte("signing-key:2026-02"))
	fmt.Println(errors.Is(err, rootkey.ErrDecrypt))

	k.Seal()
	_, err = k.Decrypt(ct, aad)
	fmt.Println(errors.Is(err, rootkey.ErrSealed))
	// Output:
	// -----BEGIN PRIVATE KEY-----... <nil>
	// true
	// true
}
