package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/jose"
)

func (a *app) keysGenerate(_ context.Context, args []string) error {
	fs := a.flags("keygate keys generate", "--alg ALG [--bits N] [--out FILE]",
		"Generates a private key for ALG and writes it as PKCS#8 PEM, to stdout or to a new\n"+
			"FILE created with mode 0600 (an existing file is never overwritten). For HS256,\n"+
			"HS384 and HS512 it writes a random secret of raw bytes, and needs --out.")
	var alg algFlag
	fs.Var(&alg, "alg", "the `ALG` the key is for: "+algNames()+" (required)")
	bits := fs.Int("bits", 0, fmt.Sprintf("RSA modulus size in bits: one of %v (default %d)", keyfile.RSABits, keyfile.DefaultRSABits))
	out := fs.String("out", "", "write to this new `FILE` instead of stdout")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	if err := checkGenerateFlags(fs, jose.Alg(alg), *bits, *out); err != nil {
		return err
	}
	if keyfile.IsHMAC(jose.Alg(alg)) {
		return a.generateSecret(jose.Alg(alg), *out)
	}
	return a.generateKey(jose.Alg(alg), *bits, *out)
}

func checkGenerateFlags(fs *flagSet, alg jose.Alg, bits int, out string) error {
	switch {
	case alg == 0:
		return usageErrorf(fs.Name(), "--alg is required")
	case fs.isSet("bits") && !keyfile.IsRSA(alg):
		return usageErrorf(fs.Name(), "--bits applies only to RSA algorithms, not %s", alg)
	case fs.isSet("bits") && !slices.Contains(keyfile.RSABits, bits):
		return usageErrorf(fs.Name(), "--bits must be one of %v", keyfile.RSABits)
	case keyfile.IsHMAC(alg) && out == "":
		return usageErrorf(fs.Name(), "an HMAC secret is raw bytes: give --out FILE")
	}
	return nil
}

func (a *app) generateKey(alg jose.Alg, bits int, out string) error {
	priv, err := keyfile.Generate(alg, bits)
	if err != nil {
		return fmt.Errorf("generate %s key: %w", alg, err)
	}
	pem, err := jose.MarshalPrivatePEM(priv)
	if err != nil {
		return fmt.Errorf("encode key: %w", err)
	}
	if out == "" {
		_, err := a.stdout.Write(pem)
		return err
	}
	if err := keyfile.WriteNew(out, pem); err != nil {
		return fmt.Errorf("write key: %w", err)
	}
	k, err := jose.NewKey(alg, "", priv.Public())
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "wrote %s private key to %s (thumbprint %s)\n", alg, out, k.Thumbprint())
	return nil
}

func (a *app) generateSecret(alg jose.Alg, out string) error {
	secret, err := keyfile.GenerateSecret(alg)
	if err != nil {
		return err
	}
	if err := keyfile.WriteNew(out, secret); err != nil {
		return fmt.Errorf("write secret: %w", err)
	}
	fmt.Fprintf(a.stdout, "wrote %d-byte %s secret to %s\n", len(secret), alg, out)
	return nil
}

func (a *app) keysJWKS(_ context.Context, args []string) error {
	fs := a.flags("keygate keys jwks", "[--alg ALG] [--kid KID] FILE... | --secret-file FILE [--alg HS256] [--kid KID]",
		"Prints the public JWKS of the keys in each FILE: PEM (public or private key), JWK\n"+
			"or JWKS. A key's kid is --kid, else the JWK's own, else its RFC 7638 thumbprint.\n"+
			"With --secret-file, the HMAC secret in that file (raw bytes, as keys generate --alg HS256\n"+
			"writes it) as the oct JWKS an issuer's key_files take: it holds the secret, so write it\n"+
			"to a file only its readers can open.")
	var alg algFlag
	fs.Var(&alg, "alg", "bind every key to this `ALG` (default: the one each key implies; RS256 for RSA; HS256 for a secret)")
	kid := fs.String("kid", "", "the `KID` of the key (only with one FILE)")
	secretFile := fs.String("secret-file", "", "print this HMAC secret `FILE` as an oct JWKS")
	files, err := fs.parse(args, 0, -1)
	if err != nil {
		return err
	}
	if *secretFile != "" {
		if len(files) > 0 {
			return usageErrorf(fs.Name(), "--secret-file takes no other FILE")
		}
		return a.secretJWKS(*secretFile, jose.Alg(alg), *kid)
	}
	if len(files) == 0 {
		return usageErrorf(fs.Name(), "too few arguments (usage: %s)", fs.synop)
	}
	if *kid != "" && len(files) > 1 {
		return usageErrorf(fs.Name(), "--kid needs exactly one FILE")
	}
	var keys []*jose.Key
	for _, f := range files {
		ks, err := keyfile.LoadKeys(f, algList(jose.Alg(alg)), *kid)
		if err != nil {
			return err
		}
		keys = append(keys, ks...)
	}
	doc, err := jose.NewKeySet(keys...).MarshalJSON()
	if err != nil {
		return fmt.Errorf("encode JWKS: %w", err)
	}
	return a.printJSON(doc)
}

// secretJWKS prints the HMAC secret in path as a one-key oct JWKS bound to
// alg (HS256 by default) under kid (default: the key's thumbprint, which
// reveals nothing of the secret), checked the way key_files load it.
func (a *app) secretJWKS(path string, alg jose.Alg, kid string) error {
	if alg == 0 {
		alg = jose.HS256
	}
	if !keyfile.IsHMAC(alg) {
		return usageErrorf("keygate keys jwks", "--secret-file takes HS256, HS384 or HS512, not %s", alg)
	}
	secret, err := keyfile.Read(path)
	if err != nil {
		return err
	}
	key, err := jose.NewHMACKey(alg, kid, secret) // refuses a secret shorter than the hash
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if kid == "" {
		kid = key.Thumbprint()
	}
	doc, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "oct", "kid": kid, "alg": alg.String(), "use": "sig", "k": base64.RawURLEncoding.EncodeToString(secret)}}})
	clear(secret)
	if _, err := keyfile.ParseKeys(doc, []jose.Alg{alg}, ""); err != nil {
		return fmt.Errorf("the oct JWKS does not load back: %w", err)
	}
	fmt.Fprintln(a.stderr, "keygate: the JWKS below holds the secret: keep it where only keygate and the issuer can read it")
	return a.printJSON(doc)
}

func (a *app) keysThumbprint(_ context.Context, args []string) error {
	fs := a.flags("keygate keys thumbprint", "FILE",
		"Prints the RFC 7638 SHA-256 thumbprint of the key in FILE (PEM or JWK), one line\n"+
			"per distinct key for a JWKS.")
	files, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	keys, err := keyfile.LoadKeys(files[0], nil, "")
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if tp := k.Thumbprint(); !seen[tp] {
			seen[tp] = true
			fmt.Fprintln(a.stdout, tp)
		}
	}
	return nil
}

func algList(alg jose.Alg) []jose.Alg {
	if alg == 0 {
		return nil
	}
	return []jose.Alg{alg}
}

// printJSON writes a JSON document indented, with a final newline.
func (a *app) printJSON(doc []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, doc, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := a.stdout.Write(buf.Bytes())
	return err
}
