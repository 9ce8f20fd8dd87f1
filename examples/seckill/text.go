package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// maxBody bounds every request body: the largest legal one, an order
// with a 128-byte ID, is far below it.
const maxBody = 4 << 10

// checkText refuses an ID or SKU that could print like another or be
// read differently by another program: invalid UTF-8, U+FFFD (what
// encoding/json makes of invalid bytes and lone surrogates, so that two
// different inputs would name one order), text not in Unicode
// normalization form C (a decomposed "café" prints as the precomposed
// one), and control, format (bidi overrides, zero-width characters),
// private-use, line or paragraph separator characters, variation
// selectors, the other default-ignorable code points (U+3164 HANGUL
// FILLER prints as nothing) and spaces other than U+0020. The library's
// ValidateID and ValidateSKU then apply their own limits.
func checkText(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", stockguard.ErrInvalidRequest, what)
	}
	for _, r := range s {
		if r == utf8.RuneError || r != ' ' && unicode.Is(unicode.Zs, r) ||
			unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Zl, unicode.Zp, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point) {
			return fmt.Errorf("%w: %s contains %U", stockguard.ErrInvalidRequest, what, r)
		}
	}
	if !norm.NFC.IsNormalString(s) {
		return fmt.Errorf("%w: %s is not in Unicode normalization form C (NFC)", stockguard.ErrInvalidRequest, what)
	}
	return nil
}

// checkSKU is checkText for a client's SKU, which also may not start
// with the service's reservedPrefix.
func checkSKU(sku string) error {
	if err := checkText("sku", sku); err != nil {
		return err
	}
	if strings.HasPrefix(sku, reservedPrefix) {
		return fmt.Errorf("%w: sku may not start with %q", stockguard.ErrInvalidRequest, reservedPrefix)
	}
	return strategy.ValidateSKU(sku)
}

// errUnsupportedMedia is a body that is not application/json.
var errUnsupportedMedia = errors.New("unsupported media type")

// decode reads r's body into v, answering 415, 413 or 400 itself when it
// cannot. A body must be application/json (charset utf-8 if any), at
// most maxBody bytes, valid UTF-8, and exactly one JSON object whose keys
// are among fields, spelt exactly, each at most once, with scalar values:
// anything a gateway in front could read differently — a second object,
// trailing bytes, a repeated or case-folded key — is refused rather than
// guessed at.
func decode(w http.ResponseWriter, r *http.Request, v any, fields ...string) bool {
	if err := checkMedia(r.Header.Get("Content-Type")); err != nil {
		writeJSON(w, http.StatusUnsupportedMediaType, errorBody{Code: "unsupported_media_type", Error: "the body must be application/json"})
		return false
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, errorBody{Code: "too_large", Error: fmt.Sprintf("the body is over %d bytes", maxBody)})
			return false
		}
		writeJSON(w, http.StatusBadRequest, errorBody{Code: "bad_request", Error: "the body could not be read"})
		return false
	}
	if err := checkObject(raw, fields); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Code: "bad_request", Error: err.Error()})
		return false
	}
	if err := json.Unmarshal(raw, v); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Code: "bad_request", Error: "body: a field has the wrong type"})
		return false
	}
	return true
}

func checkMedia(contentType string) error {
	media, params, err := mime.ParseMediaType(contentType)
	if err != nil || media != "application/json" {
		return errUnsupportedMedia
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return errUnsupportedMedia
		}
	}
	return nil
}

// checkObject reports whether raw is one flat JSON object as decode
// describes.
func checkObject(raw []byte, fields []string) error {
	if !utf8.Valid(raw) {
		return errors.New("body: not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errors.New("body: want one JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return errors.New("body: malformed JSON")
		}
		key := tok.(string) // inside an object, Token returns keys as strings
		switch {
		case !slices.Contains(fields, key):
			return fmt.Errorf("body: unknown field %q", key)
		case seen[key]:
			return fmt.Errorf("body: field %q appears twice", key)
		}
		seen[key] = true
		val, err := dec.Token()
		if err != nil {
			return errors.New("body: malformed JSON")
		}
		if _, nested := val.(json.Delim); nested {
			return fmt.Errorf("body: field %q is not a single value", key)
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return errors.New("body: malformed JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("body: data after the object")
	}
	return nil
}
