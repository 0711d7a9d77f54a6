package dashboard

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

// dist is the built page (web/, `make build`); committed, so that the hub compiles without Node.js.
//
//go:embed all:dist
var dist embed.FS

// asset is one file of dist, with its gzip encoding when that is smaller.
type asset struct {
	body, gzipped []byte
	contentType   string
	etag          string
}

type assets struct {
	files map[string]*asset // by path below dist
}

// Stats reports the built page's size: files, their bytes, and the bytes a browser that takes gzip downloads.
type Stats struct {
	Files     int
	Bytes     int
	GzipBytes int
}

// AssetStats reports the embedded page's size (for measurements and the docs).
func AssetStats() (Stats, error) {
	a, err := loadAssets()
	if err != nil {
		return Stats{}, err
	}
	var s Stats
	for _, f := range a.files {
		s.Files++
		s.Bytes += len(f.body)
		if f.gzipped != nil {
			s.GzipBytes += len(f.gzipped)
		} else {
			s.GzipBytes += len(f.body)
		}
	}
	return s, nil
}

// loadAssets reads dist and compresses what compresses.
func loadAssets() (*assets, error) {
	a := &assets{files: map[string]*asset{}}
	err := fs.WalkDir(dist, "dist", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := dist.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "dist/")
		ct := mime.TypeByExtension(path.Ext(name))
		if ct == "" {
			ct = http.DetectContentType(body)
		}
		sum := sha256.Sum256(body)
		f := &asset{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(body)
		if err := zw.Close(); err != nil {
			return err
		}
		if buf.Len() < len(body) {
			f.gzipped = buf.Bytes()
		}
		a.files[name] = f
		return nil
	})
	if err != nil {
		return nil, err
	}
	if a.files["index.html"] == nil {
		return nil, fmt.Errorf("dist/index.html is missing: run make build")
	}
	return a, nil
}

// serve answers a GET of the page: a file of dist by its name, and index.html for every other path, which the
// page's router then reads (/dashboard/projects/dev, ...). Hashed assets are cached for good, index.html never.
func (a *assets) serve(w http.ResponseWriter, r *http.Request, name string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method+" is not served on the dashboard's pages")
		return
	}
	f, ok := a.files[name]
	switch {
	case ok && strings.HasPrefix(name, "assets/"):
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	case !ok && strings.HasPrefix(name, "assets/"):
		writeStatus(w, http.StatusNotFound, "NotFound", "no asset "+name)
		return
	default:
		if !ok {
			f = a.files["index.html"]
		}
		w.Header().Set("Cache-Control", "no-cache")
	}
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	h.Set("ETag", f.etag)
	h.Add("Vary", "Accept-Encoding")
	if match := r.Header.Get("If-None-Match"); match != "" && match == f.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := f.body
	if f.gzipped != nil && acceptsGzip(r) {
		h.Set("Content-Encoding", "gzip")
		body = f.gzipped
	}
	h.Set("Content-Length", fmt.Sprint(len(body)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(body)
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.TrimSpace(enc) == "gzip" && strings.ReplaceAll(q, " ", "") != "q=0" {
			return true
		}
	}
	return false
}
