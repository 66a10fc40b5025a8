package transcript

import (
	"fmt"
	"os"
)

// Contents is a whole transcript as ReadAll found it.
type Contents struct {
	// Records are the good records, from seq 1, up to the first line that
	// is not the record expected there.
	Records []Record
	// Torn is the torn last line that Open would cut off and keep aside;
	// nil when the file ends after a whole record. A transcript being
	// written while it is read may show the record being written as torn.
	Torn *Tail
	// Damaged says where the transcript is damaged before its last line;
	// nil when it is not.
	Damaged *DamageInfo
}

// ReadAll reads the transcript at path for a reader that is not its writer,
// such as a listing of an idle session. It checks every line as Open does
// but never writes, truncates or locks the file: a torn tail or damage is
// reported in the result, not repaired.
func ReadAll(path string) (*Contents, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading transcript: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading transcript %s: %w", path, pathErrCause(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("reading transcript %s: not a regular file (%s)", path, fi.Mode().Type())
	}
	s, err := scan(f, fi.Size(), true)
	if err != nil {
		return nil, fmt.Errorf("reading transcript %s: %w", path, pathErrCause(err))
	}
	return &Contents{Records: s.records, Torn: s.torn, Damaged: s.damage}, nil
}
