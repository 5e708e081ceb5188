package transitapi

// RouteNames lists the Operation names of every route, for the tests that
// must cover them all.
func RouteNames() []string {
	var out []string
	for _, rt := range []*route{rList, rCreate, rRead, rDelete, rConfig, rRotate, rTrim, rImport, rImportVersion, rWrappingKey,
		rExport, rEncrypt, rDecrypt, rRewrap, rDataKey, rSign, rVerify, rHMAC, rRandom, rHash} {
		out = append(out, rt.name)
	}
	return out
}

// RaceEnabled tells the external tests whether allocation counts mean
// anything.
const RaceEnabled = raceEnabled
