package engine

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The disk tier's owners journal, prefix-MODEL.owners beside the block
// files: who produced each block on disk (pblock.owners), one change a
// line — "+HASH OWNER" when a block gains an owner, "-HASH OWNER" when a
// deleted session leaves it (HASH in 16 hex digits, OWNER a quoted Go
// string). The block files stay as written: a session's deletion appends
// a line per block it touches instead of rewriting blocks that others
// still hold. At start-up the journal is replayed in order onto the
// blocks found, a block it never names is held in common (""; written
// before owners were recorded), and it is rewritten with only the owners
// that hold; it is compacted the same way when it has grown to several
// times that.
type ownersJournal struct {
	f     *os.File
	w     *bufio.Writer
	lines int // lines in the file
	err   error
}

func (d *prefixDisk) journalPath() string {
	return filepath.Join(d.dir, "prefix-"+d.tid+".owners")
}

func (j *ownersJournal) log(op byte, hash uint64, owner string) {
	if j.w == nil || j.err != nil {
		return
	}
	_, j.err = fmt.Fprintf(j.w, "%c%016x %s\n", op, hash, strconv.Quote(owner))
	j.lines++
}

func (j *ownersJournal) close() {
	if j.f != nil {
		j.flush(false)
		j.f.Close()
		j.f, j.w = nil, nil
	}
}

// flush writes the buffered lines, and syncs them when sync is set.
func (j *ownersJournal) flush(sync bool) error {
	if j.w == nil {
		return nil
	}
	if j.err == nil {
		j.err = j.w.Flush()
	}
	if j.err == nil && sync {
		j.err = j.f.Sync()
	}
	return j.err
}

// addOwners adds owners to b, journaling those it did not have.
func (d *prefixDisk) addOwners(b *diskBlock, owners []string) {
	for _, o := range owners {
		if slices.Contains(b.owners, o) {
			continue
		}
		b.owners = addOwner(b.owners, o)
		d.journal.log('+', b.hash, o)
	}
	d.saveOwners(false)
}

// syncOwners makes the journal durable: a purge's removals are on disk
// before its files go.
func (d *prefixDisk) syncOwners() { d.saveOwners(true) }

// saveOwners flushes the journal (synced when sync), compacting it when it
// holds more than four times the lines that still matter.
func (d *prefixDisk) saveOwners(sync bool) {
	live := 0
	for _, b := range d.blocks {
		live += len(b.owners)
	}
	if d.journal.lines > 4*live+1024 {
		if err := d.compactOwners(); err != nil {
			d.log.Warn("prefix cache dir: cannot compact the owners journal", "err", err)
		}
		return
	}
	if err := d.journal.flush(sync); err != nil {
		d.log.Warn("prefix cache dir: cannot write the owners journal", "path", d.journalPath(), "err", err)
	}
}

// loadOwners replays the journal onto the indexed blocks. A block whose
// owners all left (a purge cut short before its files went) and that no
// block continues is deleted now.
func (d *prefixDisk) loadOwners() error {
	named := map[uint64][]string{}
	raw, err := os.ReadFile(d.journalPath())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for line := range strings.Lines(string(raw)) {
		line = strings.TrimSuffix(line, "\n")
		if len(line) < 19 || (line[0] != '+' && line[0] != '-') || line[17] != ' ' {
			continue // a torn last line
		}
		hash, err1 := strconv.ParseUint(line[1:17], 16, 64)
		owner, err2 := strconv.Unquote(line[18:])
		if err1 != nil || err2 != nil || d.blocks[hash] == nil {
			continue
		}
		if line[0] == '+' {
			named[hash] = addOwner(named[hash], owner)
		} else {
			named[hash] = slices.DeleteFunc(slices.Clone(named[hash]), func(o string) bool { return o == owner })
			if named[hash] == nil {
				named[hash] = []string{} // named, and left by all
			}
		}
	}
	var orphans []*diskBlock
	for _, b := range d.blocks {
		owners, ok := named[b.hash]
		switch {
		case !ok:
			b.owners = []string{""}
		case len(owners) > 0:
			b.owners = owners
		default:
			b.owners = []string{""}
			orphans = append(orphans, b)
		}
	}
	slices.SortFunc(orphans, func(a, b *diskBlock) int { return b.start - a.start })
	for _, b := range orphans {
		if len(d.children[b.hash]) == 0 {
			d.drop(b)
			d.purged++
		}
	}
	return d.compactOwners()
}

// compactOwners rewrites the journal with one line per block and owner,
// and opens it for appending.
func (d *prefixDisk) compactOwners() error {
	d.journal.close()
	lines := 0
	_, err := writeFileAtomic(d.journalPath(), func(w *bufio.Writer) error {
		for _, b := range d.blocks {
			line := "+%016x %s\n"
			owners := b.owners
			if len(owners) == 0 { // left by all, its file about to go
				line, owners = "-%016x %s\n", []string{""}
			}
			for _, o := range owners {
				if _, err := fmt.Fprintf(w, line, b.hash, strconv.Quote(o)); err != nil {
					return err
				}
				lines++
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(d.journalPath(), os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	d.journal = ownersJournal{f: f, w: bufio.NewWriter(f), lines: lines}
	return nil
}
