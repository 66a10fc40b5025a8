package transcript

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gofrs/flock"
	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/internal/atomicfile"
)

// Options configure Open.
type Options struct {
	// Now returns the time stamped on appended records and in the names of
	// set-aside files. Nil means time.Now.
	Now func() time.Time
}

// Log is a transcript open for appending by its single writer. It is safe
// for concurrent use: one writer appends while any number of readers read
// and page.
//
// Reads run outside the lock: a record, once appended, never moves or
// changes, so a reader takes the byte range it needs under the lock and
// reads it after.
type Log struct {
	// Constant after Open.
	path    string
	now     func() time.Time
	repairs []Repair
	damage  *DamageInfo

	mu sync.Mutex
	// f is the open file, nil once closed. Guarded by mu.
	f *os.File
	// lock holds the file's exclusive lock, through a descriptor of its
	// own; Close lets go of it. Guarded by mu.
	lock *flock.Flock
	// offsets[i] is the byte offset of the line of the record with seq
	// i+1; it only grows, so len(offsets) is the last seq. Guarded by mu.
	offsets []int64
	// end is the end of the last record's line, where the next goes.
	// Guarded by mu.
	end int64
	// broken is set when a failed append could not be undone: the file may
	// end in a partial line, so nothing more is appended. Guarded by mu.
	broken error
	// buf is scratch space for encoding a record. Guarded by mu.
	buf []byte
}

// Open opens the transcript at path for appending, creating it (mode 0600)
// when it does not exist; the directory must exist. It takes an exclusive
// lock on the file for as long as the Log is open: a second Open of the same
// file fails with ErrInUse until the first Log is closed or its process
// dies.
//
// Open reads the whole file once, checking every line. A torn last line is
// cut off and its bytes written beside the file first (see Repairs). A
// damaged line before the end leaves the file untouched and the Log readable
// up to the last good record before it, refusing appends (see Damaged).
func Open(path string, opts Options) (*Log, error) {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	_, statErr := os.Lstat(path)
	created := errors.Is(statErr, fs.ErrNotExist)
	f, err := atomicfile.Open(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening transcript: %w", err)
	}
	lock := flock.New(path, flock.SetFlag(os.O_RDONLY|unix.O_NOFOLLOW))
	l, err := open(f, lock, path, now, created)
	if err != nil {
		lock.Unlock()
		f.Close()
		return nil, fmt.Errorf("opening transcript %s: %w", path, err)
	}
	return l, nil
}

func open(f *os.File, lock *flock.Flock, path string, now func() time.Time, created bool) (*Log, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	switch locked, err := lock.TryLock(); {
	case err != nil:
		return nil, fmt.Errorf("locking: %w", err)
	case !locked:
		return nil, ErrInUse
	}
	if created {
		// Make the new file's name durable along with its first records.
		if err := syncDir(filepath.Dir(path)); err != nil {
			return nil, err
		}
	}
	s, err := scan(f, fi.Size(), false)
	if err != nil {
		return nil, err
	}
	l := &Log{path: path, now: now, damage: s.damage, f: f, lock: lock, offsets: s.offsets, end: s.end}
	if s.torn != nil {
		aside, err := setAside(f, path, *s.torn, now)
		if err != nil {
			return nil, fmt.Errorf("keeping the torn last line (line %d, %d bytes at byte %d) aside: %w",
				s.torn.Line, s.torn.Bytes, s.torn.Offset, err)
		}
		if err := f.Truncate(s.torn.Offset); err != nil {
			return nil, fmt.Errorf("cutting the torn last line (kept in %s): %w", aside, err)
		}
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("cutting the torn last line (kept in %s): %w", aside, err)
		}
		l.repairs = []Repair{{Tail: *s.torn, SetAside: aside}}
	}
	return l, nil
}

// setAside copies the torn bytes to a new file beside the transcript,
// <path>.damaged-<UTC time>-<n> with the first n that names no file yet,
// and makes it durable before the caller cuts the bytes off.
func setAside(f *os.File, path string, t Tail, now func() time.Time) (string, error) {
	stamp := now().UTC().Format("20060102T150405Z")
	for n := 1; n <= 10000; n++ {
		name := fmt.Sprintf("%s.damaged-%s-%d", path, stamp, n)
		af, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if err := copyAside(af, f, t); err != nil {
			af.Close()
			os.Remove(name)
			return "", err
		}
		if err := af.Close(); err != nil {
			os.Remove(name)
			return "", err
		}
		if err := syncDir(filepath.Dir(path)); err != nil {
			return "", err
		}
		return name, nil
	}
	return "", errors.New("too many set-aside files with this time stamp")
}

func copyAside(dst *os.File, src io.ReaderAt, t Tail) error {
	n, err := io.Copy(dst, io.NewSectionReader(src, t.Offset, t.Bytes))
	if err != nil {
		return err
	}
	if n != t.Bytes {
		return fmt.Errorf("copied %d of %d bytes", n, t.Bytes)
	}
	return dst.Sync()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Path returns the transcript's path.
func (l *Log) Path() string { return l.path }

// Repairs reports what Open cut off the end of the file, and where it kept
// the bytes. It is empty when the file ended after a whole record.
func (l *Log) Repairs() []Repair {
	return append([]Repair(nil), l.repairs...)
}

// Damaged reports where the transcript is damaged, or nil when it is not.
// A damaged Log reads up to the last good record before the damage and
// refuses appends with ErrDamaged.
func (l *Log) Damaged() *DamageInfo {
	if l.damage == nil {
		return nil
	}
	d := *l.damage
	return &d
}

// Last returns the last record's seq, 0 when the transcript is empty.
func (l *Log) Last() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return uint64(len(l.offsets))
}

// Append adds one record with the next seq: typ (not empty), turnID (may be
// empty) and data, encoded with json.Marshal (a json.RawMessage is written
// as it is, compacted). The record's line goes to the file in one write.
//
// Append leaves the record in the operating system's buffers; Sync makes it
// durable. When the write fails, for instance with the disk full, Append
// cuts the file back to where it ended, so the file still ends after a whole
// record, and returns an error that wraps the cause ("appending to
// transcript <path>: no space left on device"). The Log stays readable, and
// a later Append may succeed once there is room.
func (l *Log) Append(typ, turnID string, data any) (Record, error) {
	if typ == "" {
		return Record{}, fmt.Errorf("appending to transcript %s: %w: no type", l.path, ErrInvalidRecord)
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return Record{}, fmt.Errorf("appending to transcript %s: %w: data: %v", l.path, ErrInvalidRecord, err)
	}
	t := l.now().UTC()

	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.appendableLocked(); err != nil {
		return Record{}, err
	}
	seq := uint64(len(l.offsets)) + 1
	line, err := encodeLine(l.buf[:0], seq, t, typ, turnID, raw)
	if err != nil {
		return Record{}, fmt.Errorf("appending to transcript %s: %w", l.path, err)
	}
	if len(line)-1 > MaxRecordBytes {
		return Record{}, fmt.Errorf("appending to transcript %s: %w: %d bytes, at most %d",
			l.path, ErrTooLarge, len(line)-1, MaxRecordBytes)
	}
	if cap(line) <= 64<<10 {
		l.buf = line[:0]
	}
	if err := l.writeLocked(line); err != nil {
		return Record{}, err
	}
	l.offsets = append(l.offsets, l.end)
	l.end += int64(len(line))
	return Record{Seq: seq, Time: t, Type: typ, TurnID: turnID, Data: raw}, nil
}

func (l *Log) appendableLocked() error {
	switch {
	case l.f == nil:
		return fmt.Errorf("appending to transcript %s: %w", l.path, ErrClosed)
	case l.damage != nil:
		return fmt.Errorf("appending to transcript %s: %w: %s", l.path, ErrDamaged, l.damage)
	case l.broken != nil:
		return fmt.Errorf("appending to transcript %s: a failed append could not be undone: %w", l.path, l.broken)
	}
	return nil
}

// writeLocked writes line at the end of the file, and on failure cuts the
// file back to l.end.
func (l *Log) writeLocked(line []byte) error {
	n, err := l.f.Write(line)
	if err == nil && n == len(line) {
		return nil
	}
	if err == nil {
		err = io.ErrShortWrite
	}
	err = fmt.Errorf("appending to transcript %s: %w", l.path, pathErrCause(err))
	if n == 0 && !partial(l.f, l.end) {
		return err
	}
	if terr := l.f.Truncate(l.end); terr != nil {
		l.broken = fmt.Errorf("%w; cutting the partial line off: %w", pathErrCause(err), pathErrCause(terr))
		return fmt.Errorf("%w; cutting the partial line off: %w", err, pathErrCause(terr))
	}
	return err
}

// partial reports whether the file has grown past end, or its size is
// unknown.
func partial(f *os.File, end int64) bool {
	fi, err := f.Stat()
	return err != nil || fi.Size() != end
}

// pathErrCause strips the *fs.PathError around an error of the file, whose
// operation and path the caller's message already says.
func pathErrCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Sync makes every appended record durable (fsync). The worker calls it at
// turn boundaries and before it acknowledges a command.
func (l *Log) Sync() error {
	l.mu.Lock()
	f := l.f
	l.mu.Unlock()
	if f == nil {
		return fmt.Errorf("syncing transcript %s: %w", l.path, ErrClosed)
	}
	if err := f.Sync(); err != nil {
		if errors.Is(err, os.ErrClosed) {
			err = ErrClosed
		}
		return fmt.Errorf("syncing transcript %s: %w", l.path, pathErrCause(err))
	}
	return nil
}

// AppendSync appends a record and syncs the transcript. When the append
// succeeds but the sync fails it returns the record with the error: the
// record is in the transcript and readable, but may not be on disk.
func (l *Log) AppendSync(typ, turnID string, data any) (Record, error) {
	rec, err := l.Append(typ, turnID, data)
	if err != nil {
		return Record{}, err
	}
	return rec, l.Sync()
}

// Close syncs and closes the transcript, releasing its lock. Closing a
// closed Log does nothing.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if uerr := l.lock.Unlock(); err == nil {
		err = uerr
	}
	if err != nil {
		return fmt.Errorf("closing transcript %s: %w", l.path, pathErrCause(err))
	}
	return nil
}

// Read returns the records from seq from through seq to, both included. A to
// past the last record reads through the last; a from past it returns none.
// from must be at least 1 and to at least from (ErrOutOfRange).
func (l *Log) Read(from, to uint64) ([]Record, error) {
	if from == 0 || to < from {
		return nil, fmt.Errorf("reading transcript %s: %w: %d to %d", l.path, ErrOutOfRange, from, to)
	}
	sp, err := l.spanOf(func(last uint64) (uint64, uint64) { return from, min(to, last) })
	if err != nil {
		return nil, fmt.Errorf("reading transcript %s: %w", l.path, err)
	}
	lines, err := sp.read()
	if err != nil {
		return nil, fmt.Errorf("reading transcript %s: %w", l.path, err)
	}
	recs := make([]Record, len(lines))
	for i, line := range lines {
		seq := sp.first + uint64(i)
		if reason := parseLine(line, &recs[i]); reason != "" {
			return nil, fmt.Errorf("reading transcript %s: seq %d: %s", l.path, seq, reason)
		}
		if recs[i].Seq != seq {
			return nil, fmt.Errorf("reading transcript %s: seq %d: the file changed under the transcript", l.path, seq)
		}
	}
	return recs, nil
}

// span is the byte range of records first through first+len(offsets)-1,
// taken under the lock and read after it.
type span struct {
	f       *os.File
	first   uint64
	offsets []int64 // each record's start, then the end of the last
}

// spanOf returns the span of records lo through hi, as bounds chooses them
// from the last seq. A span with lo > hi is empty.
func (l *Log) spanOf(bounds func(last uint64) (lo, hi uint64)) (span, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return span{}, ErrClosed
	}
	lo, hi := bounds(uint64(len(l.offsets)))
	return l.spanLocked(lo, hi), nil
}

func (l *Log) spanLocked(lo, hi uint64) span {
	if lo > hi || lo == 0 {
		return span{f: l.f, first: lo}
	}
	offs := make([]int64, 0, hi-lo+2)
	offs = append(offs, l.offsets[lo-1:hi]...)
	offs = append(offs, l.endOfLocked(hi))
	return span{f: l.f, first: lo, offsets: offs}
}

// endOfLocked returns where the line of record seq ends, its newline
// included.
func (l *Log) endOfLocked(seq uint64) int64 {
	if seq < uint64(len(l.offsets)) {
		return l.offsets[seq]
	}
	return l.end
}

// sizeLocked returns the length of the line of record seq, newline included.
func (l *Log) sizeLocked(seq uint64) int64 {
	return l.endOfLocked(seq) - l.offsets[seq-1]
}

// read reads the span's lines, each without its newline.
func (s span) read() ([][]byte, error) {
	if len(s.offsets) < 2 {
		return nil, nil
	}
	start := s.offsets[0]
	buf := make([]byte, s.offsets[len(s.offsets)-1]-start)
	if _, err := s.f.ReadAt(buf, start); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return nil, ErrClosed
		}
		return nil, pathErrCause(err)
	}
	lines := make([][]byte, len(s.offsets)-1)
	for i := range lines {
		b, e := s.offsets[i]-start, s.offsets[i+1]-start
		if buf[e-1] != '\n' {
			return nil, fmt.Errorf("seq %d: the file changed under the transcript", s.first+uint64(i))
		}
		lines[i] = buf[b : e-1 : e-1]
	}
	return lines, nil
}
