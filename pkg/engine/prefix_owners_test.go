package engine

import (
	"fmt"
	"os"
	"slices"
	"testing"
)

// TestOwnersJournal: the disk tier's owners survive a restart through the
// journal; a purge's removals do too; a purge cut short after its journal
// lines (files not yet deleted) is completed at start-up; blocks the
// journal never names (written before owners were recorded) are held in
// common; a torn last line is ignored.
func TestOwnersJournal(t *testing.T) {
	dir := t.TempDir()
	be := newFake(2, 128, 97)
	system := seqTokens(1, 16)
	a := append(slices.Clone(system), seqTokens(30, 20)...) // blocks of 8: 2 of system, 2 full and a partial one
	b := append(slices.Clone(system), seqTokens(60, 20)...)
	p := mustDiskStore(t, be, dir, "kv-a", 16, -1)
	computed(be, 0, a)
	computed(be, 1, b)
	if _, err := p.insert(a, 0, "A"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.insert(b, 1, "B"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.flush(); err != nil {
		t.Fatal(err)
	}
	owners := func(p *prefixStore) map[string]int { // blocks per owner
		m := map[string]int{}
		for _, d := range p.disk.blocks {
			for _, o := range d.owners {
				m[o]++
			}
		}
		return m
	}
	reopen := func() *prefixStore {
		p.disk.close()
		p = mustDiskStore(t, be, dir, "kv-a", 16, -1)
		return p
	}
	if got := owners(reopen()); got["A"] != 5 || got["B"] != 5 || len(got) != 2 {
		t.Fatalf("owners after a restart: %v, want 5 blocks each of A and B (the 2 system blocks both)", got)
	}
	if d := p.disk.purge("A"); d.blocks != 3 || d.kept != 2 {
		t.Fatalf("purge A: %+v, want its 3 own blocks deleted and the 2 system blocks kept", d)
	}
	if got := owners(reopen()); got["A"] != 0 || got["B"] != 5 || len(p.disk.blocks) != 5 {
		t.Fatalf("after purging A and a restart: owners %v, %d blocks", got, len(p.disk.blocks))
	}
	// A purge of B cut short: its lines are in the journal, its files not deleted.
	f, err := os.OpenFile(p.disk.journalPath(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	for h, d := range p.disk.blocks {
		if slices.Contains(d.owners, "B") {
			if _, err := fmt.Fprintf(f, "-%016x \"B\"\n", h); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.WriteString("+0123") // torn
	f.Close()
	if p = reopen(); len(p.disk.blocks) != 0 {
		t.Errorf("the cut purge was not completed: %d blocks left", len(p.disk.blocks))
	}
	// A journal lost: blocks are held in common.
	computed(be, 0, a)
	if _, err := p.insert(a, 0, "A"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.flush(); err != nil {
		t.Fatal(err)
	}
	p.disk.close()
	if err := os.Remove(p.disk.journalPath()); err != nil {
		t.Fatal(err)
	}
	p = mustDiskStore(t, be, dir, "kv-a", 16, -1)
	if got := owners(p); got[""] != 5 || len(got) != 1 {
		t.Errorf("without a journal: owners %v, want every block held in common", got)
	}
	if d := p.disk.purge("A"); d.blocks != 0 {
		t.Errorf("purging A removed %d blocks held in common", d.blocks)
	}
}
