package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestImageRoundTrip(t *testing.T) {
	content := []byte("#!/bin/true\nnot really a binary\n")
	for _, tc := range []struct {
		name       string
		opts       Options
		wantFile   string
		wantDirs   []string
		wantUser   string
		wantEnv    []string
		wantWorkdr string
	}{
		{
			name:       "top-level entrypoint with user and env",
			opts:       Options{Name: "registrar.dev/demoapp:local", Entrypoint: "/demoapp", User: "65532", Env: []string{"A=1", "B=x=y"}, Workdir: "/"},
			wantFile:   "demoapp",
			wantDirs:   []string{"tmp/"},
			wantUser:   "65532",
			wantEnv:    []string{"A=1", "B=x=y"},
			wantWorkdr: "/",
		},
		{
			name:     "nested entrypoint as root",
			opts:     Options{Name: "registrar.dev/pause:local", Entrypoint: "/usr/local/bin/pause"},
			wantFile: "usr/local/bin/pause",
			wantDirs: []string{"tmp/", "usr/", "usr/local/", "usr/local/bin/"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.opts.Binary = filepath.Join(dir, "bin")
			tc.opts.Out = filepath.Join(dir, "image.tar")
			if err := os.WriteFile(tc.opts.Binary, content, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := run(tc.opts); err != nil {
				t.Fatalf("run: %v", err)
			}

			tag, err := name.NewTag(tc.opts.Name)
			if err != nil {
				t.Fatal(err)
			}
			img, err := tarball.ImageFromPath(tc.opts.Out, &tag)
			if err != nil {
				t.Fatalf("read back: %v", err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.Architecture != "amd64" || cf.OS != "linux" {
				t.Errorf("platform = %s/%s, want linux/amd64", cf.OS, cf.Architecture)
			}
			if want := []string{tc.opts.Entrypoint}; !slices.Equal(cf.Config.Entrypoint, want) {
				t.Errorf("entrypoint = %q, want %q", cf.Config.Entrypoint, want)
			}
			if cf.Config.User != tc.wantUser || cf.Config.WorkingDir != tc.wantWorkdr || !slices.Equal(cf.Config.Env, tc.wantEnv) {
				t.Errorf("config user=%q workdir=%q env=%q, want %q %q %q",
					cf.Config.User, cf.Config.WorkingDir, cf.Config.Env, tc.wantUser, tc.wantWorkdr, tc.wantEnv)
			}

			layers, err := img.Layers()
			if err != nil {
				t.Fatal(err)
			}
			if len(layers) != 1 || len(cf.RootFS.DiffIDs) != 1 {
				t.Fatalf("%d layers, %d diff IDs; want 1 and 1", len(layers), len(cf.RootFS.DiffIDs))
			}
			rc, err := layers[0].Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			var dirs []string
			found := false
			tr := tar.NewReader(rc)
			for {
				hdr, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				switch hdr.Typeflag {
				case tar.TypeDir:
					dirs = append(dirs, hdr.Name)
				case tar.TypeReg:
					if hdr.Name != tc.wantFile {
						t.Errorf("unexpected file %q", hdr.Name)
						continue
					}
					found = true
					if hdr.Mode != 0o755 {
						t.Errorf("%s mode = %o, want 755", hdr.Name, hdr.Mode)
					}
					got, err := io.ReadAll(tr)
					if err != nil {
						t.Fatal(err)
					}
					if string(got) != string(content) {
						t.Errorf("%s content = %q, want %q", hdr.Name, got, content)
					}
				}
			}
			if !found {
				t.Errorf("layer has no %s", tc.wantFile)
			}
			slices.Sort(dirs)
			if !slices.Equal(dirs, tc.wantDirs) {
				t.Errorf("dirs = %q, want %q", dirs, tc.wantDirs)
			}
		})
	}
}

func TestRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.WriteFile(bin, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.tar")
	for name, o := range map[string]Options{
		"missing binary":      {Binary: filepath.Join(dir, "nope"), Name: "a.dev/b:c", Out: out, Entrypoint: "/x"},
		"relative entrypoint": {Binary: bin, Name: "a.dev/b:c", Out: out, Entrypoint: "x"},
		"root entrypoint":     {Binary: bin, Name: "a.dev/b:c", Out: out, Entrypoint: "/"},
		"bad name":            {Binary: bin, Name: "UPPER/case:tag!", Out: out, Entrypoint: "/x"},
		"no out":              {Binary: bin, Name: "a.dev/b:c", Entrypoint: "/x"},
	} {
		if err := run(o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
