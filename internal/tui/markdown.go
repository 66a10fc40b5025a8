package tui

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// mdParser parses CommonMark. It is made the first time a reply is drawn,
// not when a process starts: most agentd processes never draw one. Tables
// are found when a paragraph is drawn (see paragraph) rather than by goldmark's
// extension package, whose regular expressions, compiled when a process
// starts, cost more than the rest of goldmark.
var mdParser = sync.OnceValue(func() parser.Parser {
	return parser.NewParser(
		parser.WithBlockParsers(parser.DefaultBlockParsers()...),
		parser.WithInlineParsers(parser.DefaultInlineParsers()...),
		parser.WithParagraphTransformers(parser.DefaultParagraphTransformers()...),
	)
})

// Markdown renders s as a terminal shows it, wrapped to width cells: its
// headings, emphasis, code, lists, quotes, links, rules and tables styled
// (strikethrough and task boxes, GitHub's other extensions, stay as
// written).
// Every piece of s's text passes through Visible, entities and escapes
// after they are resolved, so the only escape sequences in what it returns
// are its own styles'. Code is shown as it is, without highlighting.
func Markdown(s string, width int) string {
	src := []byte(plain(s))
	doc := mdParser().Parse(text.NewReader(src))
	md := mdRenderer{src: src}
	return strings.Join(md.children(doc, max(width, 1)), "\n")
}

// mark is how a piece of inline text is styled.
type mark uint16

const (
	markStrong mark = 1 << iota
	markEm
	markCode
	markLink
	markURL
	markHead1
	markHead2
	markHead
	markDim
)

// style is the SGR sequence of m, made directly rather than by lipgloss,
// which styles underlined text one character at a time.
func (m mark) style() ansi.Style {
	var st ansi.Style
	if m&(markHead1|markHead2|markHead|markStrong) != 0 {
		st = st.Bold()
	}
	if m&markEm != 0 {
		st = st.Italic(true)
	}
	if m&(markHead1|markLink) != 0 {
		st = st.Underline(true)
	}
	switch {
	case m&markCode != 0:
		st = st.ForegroundColor(styles().mdCode.GetForeground())
	case m&(markURL|markDim) != 0:
		st = st.ForegroundColor(styles().dim.GetForeground())
	case m&(markHead1|markHead2|markLink) != 0:
		st = st.ForegroundColor(styles().mdLink.GetForeground())
	}
	return st
}

// paint styles s as m.
func (m mark) paint(s string) string { return m.style().Styled(s) }

// piece is inline text of one style, without control characters; "\n" is
// a hard line break.
type piece struct {
	text string
	mark mark
}

// mdRenderer draws a parsed document as lines of text.
type mdRenderer struct {
	src   []byte
	lists int // how deep in lists the block being drawn is
}

// children draws n's blocks, a blank line between two, none in the items
// of a tight list.
func (md *mdRenderer) children(n ast.Node, width int) []string {
	tight := false
	if n.Kind() == ast.KindListItem {
		if l, ok := n.Parent().(*ast.List); ok {
			tight = l.IsTight
		}
	}
	var lines []string
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		b := md.block(c, width)
		if len(b) == 0 {
			continue
		}
		if len(lines) > 0 && !tight {
			lines = append(lines, "")
		}
		lines = append(lines, b...)
	}
	return lines
}

func (md *mdRenderer) block(n ast.Node, width int) []string {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		return md.paragraph(n, width)
	case *ast.Heading:
		m := markHead
		switch n.Level {
		case 1:
			m = markHead1
		case 2:
			m = markHead2
		}
		return wrapPieces(md.inline(n, m, nil), width)
	case *ast.ThematicBreak:
		return []string{markDim.paint(strings.Repeat("─", width))}
	case *ast.CodeBlock, *ast.FencedCodeBlock:
		return md.code(n, width)
	case *ast.HTMLBlock:
		lines := md.lines(n)
		if n.HasClosure() {
			lines = append(lines, strings.TrimRight(string(n.ClosureLine.Value(md.src)), "\r\n"))
		}
		var out []string
		for _, l := range lines {
			out = append(out, wrapPieces([]piece{{l, markDim}}, width)...)
		}
		return out
	case *ast.Blockquote:
		bar := markDim.paint("│")
		lines := md.children(n, max(width-2, 1))
		for i, l := range lines {
			if l == "" {
				lines[i] = bar
			} else {
				lines[i] = bar + " " + l
			}
		}
		return lines
	case *ast.List:
		return md.list(n, width)
	}
	return md.children(n, width)
}

// lines are n's lines of source, each without its line ending.
func (md *mdRenderer) lines(n ast.Node) []string {
	segs := n.Lines()
	lines := make([]string, 0, segs.Len())
	for i := 0; i < segs.Len(); i++ {
		seg := segs.At(i)
		lines = append(lines, strings.TrimRight(string(seg.Value(md.src)), "\r\n"))
	}
	return lines
}

// code draws a code block indented by two cells, its long lines broken.
func (md *mdRenderer) code(n ast.Node, width int) []string {
	lines := md.lines(n)
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	w := max(width-2, 1)
	var out []string
	for _, l := range lines {
		if l == "" {
			out = append(out, "")
			continue
		}
		for _, part := range strings.Split(ansi.Hardwrap(l, w, true), "\n") {
			out = append(out, "  "+markCode.paint(part))
		}
	}
	return out
}

// list draws a list's items, each under its bullet or number.
func (md *mdRenderer) list(n *ast.List, width int) []string {
	md.lists++
	defer func() { md.lists-- }()
	var marks []string
	num := n.Start
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if n.IsOrdered() {
			marks = append(marks, strconv.Itoa(num)+string(n.Marker))
			num++
		} else {
			marks = append(marks, [...]string{"•", "◦", "▪"}[min(md.lists-1, 2)])
		}
	}
	mw := 0
	for _, m := range marks {
		mw = max(mw, ansi.StringWidth(m)+1)
	}
	pad := strings.Repeat(" ", mw)
	var lines []string
	i := 0
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if i > 0 && !n.IsTight {
			lines = append(lines, "")
		}
		head := marks[i] + strings.Repeat(" ", mw-ansi.StringWidth(marks[i]))
		if !n.IsOrdered() {
			head = markDim.paint(marks[i]) + strings.Repeat(" ", mw-ansi.StringWidth(marks[i]))
		}
		item := md.children(c, max(width-mw, 1))
		if len(item) == 0 {
			item = []string{""}
		}
		for j, l := range item {
			switch {
			case j == 0:
				lines = append(lines, strings.TrimRight(head+l, " "))
			case l == "":
				lines = append(lines, "")
			default:
				lines = append(lines, pad+l)
			}
		}
		i++
	}
	return lines
}

// paragraph draws a paragraph (a text block in a tight list's item), or
// the table it is: GitHub's tables,
// a header row of cells between pipes, a row of dashes under it, and rows
// of cells to the paragraph's end, are parsed here as goldmark's extension
// would (see mdParser).
func (md *mdRenderer) paragraph(n ast.Node, width int) []string {
	lines := md.lines(n)
	for i := 1; i < len(lines); i++ {
		aligns, ok := delimiterRow(lines[i])
		if !ok {
			continue
		}
		head := splitRow(lines[i-1])
		if len(head) != len(aligns) {
			continue
		}
		var out []string
		if i > 1 {
			out = append(md.sub(strings.Join(lines[:i-1], "\n"), width), "")
		}
		rows := [][]string{head}
		for _, l := range lines[i+1:] {
			rows = append(rows, splitRow(l))
		}
		return append(out, md.table(rows, aligns, width)...)
	}
	return wrapPieces(md.inline(n, 0, nil), width)
}

// sub draws s, Markdown of its own.
func (md *mdRenderer) sub(s string, width int) []string {
	sub := mdRenderer{src: []byte(s), lists: md.lists}
	return sub.children(mdParser().Parse(text.NewReader(sub.src)), width)
}

// cell is the inline text of a table's cell, styled m.
func cell(s string, m mark) []piece {
	sub := mdRenderer{src: []byte(strings.ReplaceAll(s, `\|`, "|"))}
	doc := mdParser().Parse(text.NewReader(sub.src))
	if p := doc.FirstChild(); p != nil && p.Kind() == ast.KindParagraph && p.NextSibling() == nil {
		return sub.inline(p, m, nil)
	}
	// Not a paragraph ("# x", "- x"): cells hold inline text only.
	return []piece{{string(unescape(sub.src)), m}}
}

type align int

const (
	alignNone align = iota
	alignLeft
	alignRight
	alignCenter
)

// delimiterRow reads a table's row of dashes, each cell's alignment in
// its colons.
func delimiterRow(line string) ([]align, bool) {
	if !strings.Contains(line, "|") {
		return nil, false
	}
	cells := splitRow(line)
	aligns := make([]align, len(cells))
	for i, c := range cells {
		left, right := strings.HasPrefix(c, ":"), strings.HasSuffix(c, ":")
		dashes := strings.TrimSuffix(strings.TrimPrefix(c, ":"), ":")
		if dashes == "" || strings.Trim(dashes, "-") != "" {
			return nil, false
		}
		switch {
		case left && right:
			aligns[i] = alignCenter
		case left:
			aligns[i] = alignLeft
		case right:
			aligns[i] = alignRight
		}
	}
	return aligns, true
}

// splitRow splits a table's row at the pipes not escaped, without those
// at its ends, its cells trimmed.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	if strings.HasSuffix(line, "|") && !strings.HasSuffix(line, `\|`) {
		line = line[:len(line)-1]
	}
	var cells []string
	start := 0
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case '\\':
			i++
		case '|':
			cells = append(cells, strings.TrimSpace(line[start:i]))
			start = i + 1
		}
	}
	return append(cells, strings.TrimSpace(line[start:]))
}

// table draws a table's cells in columns, narrowing the widest columns
// and wrapping their cells when the table is wider than width. rows[0] is
// the header; a row has as many cells as the header.
func (md *mdRenderer) table(rows [][]string, aligns []align, width int) []string {
	cols := len(aligns)
	cells := make([][][]piece, len(rows))
	for r, row := range rows {
		m := mark(0)
		if r == 0 {
			m = markStrong
		}
		cells[r] = make([][]piece, cols)
		for i := 0; i < cols && i < len(row); i++ {
			cells[r][i] = cell(row[i], m)
		}
	}
	widths := make([]int, cols)
	for _, row := range cells {
		for i, c := range row {
			for _, l := range wrapPieces(c, 1<<30) {
				widths[i] = max(widths[i], ansi.StringWidth(l))
			}
		}
	}
	for room := width - 3*(cols-1); ; {
		sum, widest := 0, 0
		for i, w := range widths {
			sum += w
			if w > widths[widest] {
				widest = i
			}
		}
		if sum <= room || widths[widest] <= 3 {
			break
		}
		widths[widest]--
	}
	sep := " " + markDim.paint("│") + " "
	var out []string
	for r, row := range cells {
		wrapped := make([][]string, cols)
		height := 1
		for i, c := range row {
			wrapped[i] = wrapPieces(c, max(widths[i], 1))
			height = max(height, len(wrapped[i]))
		}
		for l := range height {
			parts := make([]string, cols)
			for i := range cols {
				var s string
				if l < len(wrapped[i]) {
					s = wrapped[i][l]
				}
				parts[i] = padCell(s, widths[i], aligns[i])
			}
			out = append(out, strings.TrimRight(strings.Join(parts, sep), " "))
		}
		if r == 0 {
			rule := make([]string, cols)
			for i, w := range widths {
				rule[i] = strings.Repeat("─", w)
			}
			out = append(out, markDim.paint(strings.Join(rule, "─┼─")))
		}
	}
	return out
}

func padCell(s string, width int, a align) string {
	gap := max(width-ansi.StringWidth(s), 0)
	switch a {
	case alignRight:
		return strings.Repeat(" ", gap) + s
	case alignCenter:
		return strings.Repeat(" ", gap/2) + s + strings.Repeat(" ", gap-gap/2)
	}
	return s + strings.Repeat(" ", gap)
}

// inline appends the text of n's inline children to ps, styled m and
// what they say.
func (md *mdRenderer) inline(n ast.Node, m mark, ps []piece) []piece {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			v := c.Segment.Value(md.src)
			if !c.IsRaw() {
				v = unescape(v)
			}
			ps = append(ps, piece{Visible(string(v)), m})
			switch {
			case c.HardLineBreak():
				ps = append(ps, piece{"\n", m})
			case c.SoftLineBreak():
				ps = append(ps, piece{" ", m})
			}
		case *ast.String:
			ps = append(ps, piece{Visible(string(c.Value)), m})
		case *ast.CodeSpan:
			var b strings.Builder
			for t := c.FirstChild(); t != nil; t = t.NextSibling() {
				if t, ok := t.(*ast.Text); ok {
					b.Write(t.Segment.Value(md.src))
				}
			}
			ps = append(ps, piece{strings.ReplaceAll(Visible(b.String()), "\n", " "), m | markCode})
		case *ast.Emphasis:
			em := markEm
			if c.Level >= 2 {
				em = markStrong
			}
			ps = md.inline(c, m|em, ps)
		case *ast.Link:
			start := len(ps)
			ps = md.inline(c, m|markLink, ps)
			dest := Visible(string(c.Destination))
			if dest != "" && dest != piecesText(ps[start:]) {
				ps = append(ps, piece{" (" + dest + ")", m | markURL})
			}
		case *ast.AutoLink:
			ps = append(ps, piece{Visible(string(c.Label(md.src))), m | markLink})
		case *ast.Image:
			ps = append(ps, piece{"[image: ", m | markDim})
			ps = md.inline(c, m|markDim, ps)
			ps = append(ps, piece{"]", m | markDim})
			if dest := Visible(string(c.Destination)); dest != "" {
				ps = append(ps, piece{" (" + dest + ")", m | markURL})
			}
		case *ast.RawHTML:
			var b strings.Builder
			for i := 0; i < c.Segments.Len(); i++ {
				seg := c.Segments.At(i)
				b.Write(seg.Value(md.src))
			}
			ps = append(ps, piece{strings.ReplaceAll(Visible(b.String()), "\n", " "), m})
		default:
			ps = md.inline(c, m, ps)
		}
	}
	return ps
}

func piecesText(ps []piece) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.text)
	}
	return b.String()
}

// unescape resolves backslash escapes and character references as
// CommonMark reads them.
func unescape(v []byte) []byte {
	if bytes.IndexByte(v, '\\') < 0 && bytes.IndexByte(v, '&') < 0 {
		return v
	}
	var b []byte
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\' && i+1 < len(v) && util.IsPunct(v[i+1]):
			b = append(b, v[i+1])
			i++
		case c == '&':
			end := bytes.IndexByte(v[i:min(i+40, len(v))], ';')
			if end < 0 {
				b = append(b, c)
				continue
			}
			ref := v[i : i+end+1]
			var r []byte
			if len(ref) > 2 && ref[1] == '#' {
				r = util.ResolveNumericReferences(ref)
			} else {
				r = util.ResolveEntityNames(ref)
			}
			b = append(b, r...)
			i += end
		default:
			b = append(b, c)
		}
	}
	return b
}

// word is text wrapping does not break, and the space before it.
type word struct {
	from, to int // its pieces, of those wrapPieces cut its text into
	width    int
	space    bool // a space stands before it
	mark     mark // the space's style
	br       bool // a hard line break, not a word
}

// wrapPieces lays ps out in lines of at most width cells, breaking them
// at spaces, and words longer than a line anywhere; each line is styled on
// its own.
func wrapPieces(ps []piece, width int) []string {
	// Sized at once: a word at most for each space, a line break and
	// piece, and about one piece for each.
	n := 1
	for _, p := range ps {
		n += strings.Count(p.text, " ") + 2
	}
	words := make([]word, 0, n)
	cut := make([]piece, 0, n) // the words' pieces, in order
	cur := word{}
	for _, p := range ps {
		if p.text == "\n" {
			words = append(words, cur, word{br: true, from: len(cut), to: len(cut)})
			cur = word{from: len(cut), to: len(cut)}
			continue
		}
		for i, rest := 0, p.text; ; i++ {
			s, after, more := strings.Cut(rest, " ")
			if i > 0 {
				words = append(words, cur)
				cur = word{space: true, mark: p.mark, from: len(cut), to: len(cut)}
			}
			if s != "" {
				cut = append(cut, piece{s, p.mark})
				cur.to = len(cut)
				cur.width += cells(s)
			}
			if !more {
				break
			}
			rest = after
		}
	}
	words = append(words, cur)

	var lines []string
	// A line's pieces, drawn once it is full: its room is used again. It
	// holds at most the words' pieces and the spaces between them (a
	// table's cells are laid out at a width of no bound).
	line := make([]piece, 0, min(len(cut)+len(words), max(2*width/3, 0)+2))
	lw, started := 0, false
	emit := func() {
		lines = append(lines, renderLine(line))
		line, lw, started = line[:0], 0, false
	}
	for _, w := range words {
		if w.br {
			emit()
			continue
		}
		if started && lw+1+w.width <= width {
			line = append(line, piece{" ", w.mark})
			line = append(line, cut[w.from:w.to]...)
			lw += 1 + w.width
			continue
		}
		if w.from == w.to {
			if started {
				line = append(line, piece{" ", w.mark})
				lw++
			}
			continue
		}
		if started {
			emit()
		}
		for _, p := range cut[w.from:w.to] {
			for p.text != "" {
				if lw == width {
					emit()
				}
				head, rest := cutCells(p.text, width-lw)
				if head == "" && lw > 0 {
					emit()
					continue
				}
				if head == "" { // a character wider than the line
					head, rest = firstRune(p.text)
				}
				line = append(line, piece{head, p.mark})
				lw += cells(head)
				p.text = rest
			}
		}
		started = true
	}
	if started || len(line) > 0 || len(lines) == 0 {
		emit()
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// cells is ansi.StringWidth(s), counted at once for printable ASCII, the
// symbols the screen draws its marks with (narrowSymbols) and the control
// sequences (CSI) that style them, as most of a screen is; any other
// byte has ansi.StringWidth measure s.
func cells(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= ' ' && c <= '~':
			n++
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(s[i:])
			if !strings.ContainsRune(narrowSymbols, r) {
				return ansi.StringWidth(s)
			}
			n++
			i += size - 1
		case c == ansi.ESC && i+1 < len(s) && s[i+1] == '[':
			// Parameters, then intermediates, then the final byte: any
			// other order has ansi.StringWidth measure s.
			j := i + 2
			for j < len(s) && s[j] >= 0x30 && s[j] <= 0x3f {
				j++
			}
			for j < len(s) && s[j] >= 0x20 && s[j] <= 0x2f {
				j++
			}
			if j == len(s) || s[j] < 0x40 || s[j] > 0x7e {
				return ansi.StringWidth(s)
			}
			i = j
		default:
			return ansi.StringWidth(s)
		}
	}
	return n
}

// narrowSymbols are the characters outside ASCII the screen draws its own
// marks with (rules, prompts, separators, bullets), each one cell wide
// and none joining the character before or after it into one grapheme:
// measured as ASCII is.
const narrowSymbols = "─│❯·…●→"

// cutCells cuts s after at most n cells.
func cutCells(s string, n int) (string, string) {
	if cells(s) <= n {
		return s, ""
	}
	head := ansi.Truncate(s, n, "")
	return head, s[len(head):]
}

func firstRune(s string) (string, string) {
	for i := range s {
		if i > 0 {
			return s[:i], s[i:]
		}
	}
	return s, ""
}

// renderLine styles a line's pieces, the neighbours of one style together.
func renderLine(ps []piece) string {
	var b, run strings.Builder
	for i := 0; i < len(ps); {
		j := i + 1
		run.Reset()
		run.WriteString(ps[i].text)
		for j < len(ps) && ps[j].mark == ps[i].mark {
			run.WriteString(ps[j].text)
			j++
		}
		b.WriteString(ps[i].mark.style().Styled(run.String()))
		i = j
	}
	return strings.TrimRight(b.String(), " ")
}
