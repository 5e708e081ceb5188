package jose

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
)

// ParsePublicPEM reads the first PEM block holding a public key: "PUBLIC KEY"
// (PKIX), "RSA PUBLIC KEY" (PKCS#1) or "CERTIFICATE" (its subject key; the
// certificate itself is not validated). Bind the result with [NewKey].
func ParsePublicPEM(data []byte) (crypto.PublicKey, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, keyError("no public key PEM block found")
		}
		switch block.Type {
		case "PUBLIC KEY":
			k, err := x509.ParsePKIXPublicKey(block.Bytes)
			return pemResult(k, err)
		case "RSA PUBLIC KEY":
			k, err := x509.ParsePKCS1PublicKey(block.Bytes)
			return pemResult(k, err)
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return pemResult(nil, err)
			}
			return c.PublicKey, nil
		}
	}
}

// ParsePrivatePEM reads the first PEM block holding a private key: "PRIVATE
// KEY" (PKCS#8), "RSA PRIVATE KEY" (PKCS#1) or "EC PRIVATE KEY" (SEC 1).
// Encrypted PEM is refused. Bind the result with [NewSigner].
func ParsePrivatePEM(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, keyError("no private key PEM block found")
		}
		if _, enc := block.Headers["Proc-Type"]; enc {
			return nil, keyError("encrypted PEM is not supported")
		}
		var k any
		var err error
		switch block.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(block.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			return nil, keyError("encrypted PEM is not supported")
		default:
			continue
		}
		if err != nil {
			return nil, &Error{Reason: ReasonInvalidKey, Detail: "private key PEM does not parse", Err: err}
		}
		switch s := k.(type) {
		case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
			return s.(crypto.Signer), nil
		}
		return nil, keyError("unsupported private key type")
	}
}

func pemResult(k any, err error) (crypto.PublicKey, error) {
	if err != nil {
		return nil, &Error{Reason: ReasonInvalidKey, Detail: "public key PEM does not parse", Err: err}
	}
	return k, nil
}

// MarshalPrivatePEM encodes a private key as a PKCS#8 "PRIVATE KEY" block.
func MarshalPrivatePEM(priv crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// MarshalPublicPEM encodes a public key as a PKIX "PUBLIC KEY" block.
func MarshalPublicPEM(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}
