package safetensors_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/ellm-dev/ellm/pkg/safetensors"
)

func Example() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// Two bf16 values: 1.0 (0x3F80) and -2.0 (0xC000), little-endian.
	err = safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), []safetensors.Entry{
		{Name: "model.norm.weight", DType: safetensors.BF16, Shape: []int{2}, Data: []byte{0x80, 0x3F, 0x00, 0xC0}},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}

	ck, err := safetensors.Open(dir) // a file, a directory or an index JSON
	if err != nil {
		log.Fatal(err)
	}
	defer ck.Close()
	t, ok := ck.Tensor("model.norm.weight")
	if !ok {
		log.Fatal("missing tensor")
	}
	bits, err := t.BF16() // zero-copy view of the mapping
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ck.Names(), t.DType, t.Shape)
	fmt.Printf("%#04x %#04x\n", bits[0], bits[1])
	// Output:
	// [model.norm.weight] BF16 [2]
	// 0x3f80 0xc000
}
