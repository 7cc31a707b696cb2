// Command imagetool packs one static binary into a single-layer container image and writes
// it as a docker-archive tarball, the format `ctr -n k8s.io images import` reads. It needs no
// Docker engine and no registry:
//
//	go run ./hack/imagetool -binary bin/demoapp -name registrar.dev/demoapp:local \
//		-out bin/images/demoapp.tar -entrypoint /demoapp -user 65532 -env K=V
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Options describe the image to build.
type Options struct {
	Binary     string   // path of the binary on this machine
	Name       string   // image reference written as the archive's tag
	Out        string   // tarball to write
	Entrypoint string   // absolute path of the binary inside the image
	User       string   // config User; empty runs as the runtime's default (root)
	Env        []string // K=V entries of the config
	Workdir    string   // config WorkingDir
}

// epoch is the timestamp of every layer entry, so that the same binary gives the same image.
var epoch = time.Unix(0, 0).UTC()

func main() {
	var o Options
	flag.StringVar(&o.Binary, "binary", "", "static binary to pack (required)")
	flag.StringVar(&o.Name, "name", "", "image reference, e.g. registrar.dev/demoapp:local (required)")
	flag.StringVar(&o.Out, "out", "", "docker-archive tarball to write (required)")
	flag.StringVar(&o.Entrypoint, "entrypoint", "/app", "path of the binary in the image; the image's entrypoint")
	flag.StringVar(&o.User, "user", "", "user (numeric, e.g. 65532) the container runs as")
	flag.Func("env", "K=V environment entry of the image (repeatable)", func(s string) error {
		if !strings.Contains(s, "=") {
			return fmt.Errorf("want K=V, got %q", s)
		}
		o.Env = append(o.Env, s)
		return nil
	})
	flag.StringVar(&o.Workdir, "workdir", "/", "working directory of the image")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "imagetool:", err)
		os.Exit(1)
	}
}

func run(o Options) error {
	if o.Binary == "" || o.Name == "" || o.Out == "" {
		return fmt.Errorf("-binary, -name and -out are required")
	}
	tag, err := name.NewTag(o.Name)
	if err != nil {
		return fmt.Errorf("image name: %w", err)
	}
	img, err := Build(o)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(o.Out, tag, img); err != nil {
		return fmt.Errorf("write %s: %w", o.Out, err)
	}
	return nil
}

// Build returns an image with one layer holding the binary at o.Entrypoint (mode 0755) and
// an empty world-writable /tmp, for linux/amd64.
func Build(o Options) (v1.Image, error) {
	if !path.IsAbs(o.Entrypoint) || path.Clean(o.Entrypoint) == "/" {
		return nil, fmt.Errorf("entrypoint %q: want an absolute file path", o.Entrypoint)
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, err
	}
	layerTar, err := layerTar(path.Clean(o.Entrypoint), bin)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:   layer,
		History: v1.History{CreatedBy: "imagetool: " + path.Clean(o.Entrypoint), Created: v1.Time{Time: epoch}},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = []string{path.Clean(o.Entrypoint)}
	cf.Config.User = o.User
	cf.Config.Env = append([]string(nil), o.Env...)
	cf.Config.WorkingDir = o.Workdir
	return mutate.ConfigFile(img, cf)
}

// layerTar is an uncompressed tar with /tmp, the parent directories of file, and file itself.
func layerTar(file string, content []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: epoch})
	}
	if err := dir("tmp", 0o1777); err != nil {
		return nil, err
	}
	rel := strings.TrimPrefix(file, "/")
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		if p := strings.Join(parts[:i], "/"); p != "tmp" {
			if err := dir(p, 0o755); err != nil {
				return nil, err
			}
		}
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o755, Size: int64(len(content)), ModTime: epoch}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(content); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
