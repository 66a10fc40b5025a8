package protocol_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

// schemaFile pairs a schema in protocol.SchemaFS with the Go type it
// describes.
type schemaFile struct {
	path string
	typ  reflect.Type
	// strict is set for what the host decodes strictly: the schema must
	// forbid additional properties on every object.
	strict bool
	// kind is the frame kind the schema's "kind" property must be, if any.
	kind string
}

func schemaFiles() []schemaFile {
	files := []schemaFile{
		{"schema/hello.json", reflect.TypeFor[protocol.Hello](), true, protocol.KindHello},
		{"schema/accepted.json", reflect.TypeFor[protocol.Accepted](), false, protocol.KindAccepted},
		{"schema/incompatible.json", reflect.TypeFor[protocol.Incompatible](), false, protocol.KindIncompatible},
		{"schema/refused.json", reflect.TypeFor[protocol.Refused](), false, protocol.KindRefused},
		{"schema/request.json", reflect.TypeFor[protocol.Request](), true, ""},
		{"schema/response.json", reflect.TypeFor[protocol.Response](), false, ""},
		{"schema/session_projection.json", reflect.TypeFor[protocol.SessionProjectionFrame](), false, protocol.KindSessionProjection},
		{"schema/session_delta.json", reflect.TypeFor[protocol.SessionDeltaFrame](), false, protocol.KindSessionDelta},
		{"schema/runtime_resource_update.json", reflect.TypeFor[protocol.RuntimeResourceUpdateFrame](), false, protocol.KindRuntimeResourceUpdate},
		{"schema/runtime_resource_pty_data.json", reflect.TypeFor[protocol.RuntimeResourcePtyDataFrame](), false, protocol.KindRuntimeResourcePtyData},
		{"schema/closed.json", reflect.TypeFor[protocol.SubscriptionClosedFrame](), false, protocol.KindSubscriptionClosed},
		{"schema/session_list_update.json", reflect.TypeFor[protocol.SessionListUpdateFrame](), false, protocol.KindSessionListUpdate},
		{"schema/registration.json", reflect.TypeFor[protocol.Registration](), false, ""},
		{"schema/records/compaction.json", reflect.TypeFor[protocol.CompactionData](), false, ""},
		{"schema/records/compaction_setting.json", reflect.TypeFor[protocol.CompactionSettingData](), false, ""},
		{"schema/records/file_change.json", reflect.TypeFor[protocol.FileChangeData](), false, ""},
		{"schema/records/forked.json", reflect.TypeFor[protocol.ForkedData](), false, ""},
	}
	for _, op := range protocol.Operations() {
		files = append(files,
			schemaFile{path: "schema/operations/" + op.Name + ".input.json", typ: op.Input, strict: true},
			schemaFile{path: "schema/operations/" + op.Name + ".result.json", typ: op.Result},
		)
	}
	return files
}

func readSchema(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := fs.ReadFile(protocol.SchemaFS, path)
	if err != nil {
		t.Fatalf("no schema %s: %v", path, err)
	}
	var node map[string]any
	if err := json.Unmarshal(b, &node); err != nil {
		t.Fatalf("schema %s is not a JSON object: %v", path, err)
	}
	return node
}

func TestSchemasMatchGoTypes(t *testing.T) {
	for _, f := range schemaFiles() {
		t.Run(strings.TrimPrefix(f.path, "schema/"), func(t *testing.T) {
			node := readSchema(t, f.path)
			if got := node["$schema"]; got != "https://json-schema.org/draft/2020-12/schema" {
				t.Errorf("$schema = %v, want draft 2020-12", got)
			}
			for _, key := range []string{"$id", "title", "description"} {
				if s, _ := node[key].(string); s == "" {
					t.Errorf("%s is missing", key)
				}
			}
			c := &schemaChecker{t: t, strict: f.strict}
			c.object("", node, f.typ)
			if f.kind != "" {
				kind := property(node, "kind")
				if kind == nil || kind["const"] != f.kind {
					t.Errorf(`property "kind" must have const %q`, f.kind)
				}
			}
		})
	}
}

// embeddedSchemas are properties whose Go field is raw JSON but whose
// content the host fills with a known Go type: their schemas describe
// that type.
var embeddedSchemas = []struct {
	path string
	prop string
	typ  reflect.Type
}{
	{"schema/session_projection.json", "snapshot", reflect.TypeFor[protocol.SessionProjection]()},
	{"schema/operations/subscription.open.result.json", "snapshot", reflect.TypeFor[protocol.SessionProjection]()},
	{"schema/session_delta.json", "delta", reflect.TypeFor[protocol.SessionDelta]()},
}

func TestEmbeddedSchemasMatchGoTypes(t *testing.T) {
	for _, e := range embeddedSchemas {
		t.Run(strings.TrimPrefix(e.path, "schema/")+"#"+e.prop, func(t *testing.T) {
			node := property(readSchema(t, e.path), e.prop)
			if node == nil {
				t.Fatalf("no property %s", e.prop)
			}
			c := &schemaChecker{t: t}
			c.value(e.prop, node, e.typ, false)
		})
	}
}

func TestSchemaFSHoldsOnlyKnownSchemas(t *testing.T) {
	want := make(map[string]bool)
	for _, f := range schemaFiles() {
		want[f.path] = true
	}
	err := fs.WalkDir(protocol.SchemaFS, "schema", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !want[path] {
			t.Errorf("%s describes no frame, record or operation", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The enumerations of the schemas are the protocol's constants.
func TestSchemaEnumsMatchConstants(t *testing.T) {
	var codes []string
	for _, c := range protocol.Codes {
		codes = append(codes, string(c))
	}
	states := []string{protocol.StateStarting, protocol.StateRecovering, protocol.StateReady, protocol.StateDraining}
	approvals := []string{protocol.ApprovalAsk, protocol.ApprovalAll, protocol.ApprovalReadOnly}
	sandboxes := []string{protocol.SandboxReadOnly, protocol.SandboxWorkspace, protocol.SandboxFull}
	networks := []string{protocol.NetworkOn, protocol.NetworkOff}
	tests := []struct {
		path string
		prop []string
		want []string
	}{
		{"schema/response.json", []string{"error", "code"}, codes},
		{"schema/request.json", []string{"operation"}, protocol.OperationNames()},
		{"schema/closed.json", []string{"reason"}, []string{
			protocol.ClosedClientClosed, protocol.ClosedSessionRemoved, protocol.ClosedSlowConsumer,
			protocol.ClosedAccessRevoked, protocol.ClosedHostDraining, protocol.ClosedHostReplaced, protocol.ClosedWorkerExited,
		}},
		{"schema/registration.json", []string{"state"}, states},
		{"schema/operations/host.status.result.json", []string{"state"}, states},
		{"schema/hello.json", []string{"surface"}, []string{
			protocol.SurfaceCLI, protocol.SurfaceTUI, protocol.SurfaceWeb, protocol.SurfaceACP, protocol.SurfaceSDK,
		}},
		{"schema/accepted.json", []string{"principal", "kind"}, []string{protocol.PrincipalLocalOwner, protocol.PrincipalGuest}},
		{"schema/operations/turn.message.submit.input.json", []string{"placement"}, []string{protocol.PlacementSteering, protocol.PlacementNextTurn}},
		{"schema/operations/session.create.input.json", []string{"approval"}, approvals},
		{"schema/operations/turn.start.input.json", []string{"approval"}, approvals},
		{"schema/operations/session.create.input.json", []string{"sandbox"}, sandboxes},
		{"schema/operations/session.create.input.json", []string{"network"}, networks},
		{"schema/operations/session.get.result.json", []string{"sandbox"}, sandboxes},
		{"schema/operations/session.get.result.json", []string{"network"}, networks},
		{"schema/operations/models.list.result.json", []string{"default", "source"}, []string{protocol.ModelSourceProvider, protocol.ModelSourceBuiltin}},
	}
	for _, tt := range tests {
		t.Run(tt.path+"#"+strings.Join(tt.prop, "."), func(t *testing.T) {
			node := readSchema(t, tt.path)
			for _, p := range tt.prop {
				node = property(node, p)
				if node == nil {
					t.Fatalf("no property %s", strings.Join(tt.prop, "."))
				}
			}
			var got []string
			for _, v := range asSlice(node["enum"]) {
				s, _ := v.(string)
				got = append(got, s)
			}
			want := slices.Clone(tt.want)
			sort.Strings(got)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				t.Errorf("enum = %q, want %q", got, want)
			}
		})
	}
	if n := readSchema(t, "schema/registration.json"); property(n, "schemaVersion")["const"] != float64(protocol.RegistrationSchemaVersion) {
		t.Errorf("registration.json: schemaVersion const is not %d", protocol.RegistrationSchemaVersion)
	}
}

func property(node map[string]any, name string) map[string]any {
	props, _ := node["properties"].(map[string]any)
	p, _ := props[name].(map[string]any)
	return p
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	timeType       = reflect.TypeFor[time.Time]()
)

// goField is one JSON field of a Go struct.
type goField struct {
	name      string
	typ       reflect.Type
	omitempty bool
}

// goFields lists t's JSON fields in order, promoting the fields of embedded
// structs the way encoding/json does.
func goFields(t reflect.Type) []goField {
	var out []goField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, goFields(f.Type)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, goField{name, f.Type, slices.ContainsFunc(strings.Split(opts, ","), func(o string) bool { return o == "omitempty" || o == "omitzero" })})
	}
	return out
}

// schemaChecker compares one schema with a Go type.
type schemaChecker struct {
	t      *testing.T
	strict bool
}

func (c *schemaChecker) errorf(where, format string, args ...any) {
	c.t.Helper()
	if where == "" {
		where = "(root)"
	}
	c.t.Errorf("%s: %s", where, fmt.Sprintf(format, args...))
}

// object checks an object schema against struct type typ: the same
// properties as typ's JSON fields, required exactly the fields without
// omitempty, additional properties forbidden when strict, and each
// property's type.
func (c *schemaChecker) object(where string, node map[string]any, typ reflect.Type) {
	c.t.Helper()
	props, ok := node["properties"].(map[string]any)
	if !ok {
		c.errorf(where, "has no properties; %v has fields", typ)
		return
	}
	fields := goFields(typ)
	var wantRequired []string
	known := make(map[string]bool)
	for _, f := range fields {
		known[f.name] = true
		if !f.omitempty {
			wantRequired = append(wantRequired, f.name)
		}
		p, ok := props[f.name]
		if !ok {
			c.errorf(where, "%v has field %q, the schema has no such property", typ, f.name)
			continue
		}
		pm, ok := p.(map[string]any)
		if !ok {
			c.errorf(join(where, f.name), "is not a schema object")
			continue
		}
		c.value(join(where, f.name), pm, f.typ, f.omitempty)
	}
	for name := range props {
		if !known[name] {
			c.errorf(where, "has property %q, %v has no such field", name, typ)
		}
	}
	var gotRequired []string
	for _, r := range asSlice(node["required"]) {
		s, _ := r.(string)
		gotRequired = append(gotRequired, s)
	}
	sort.Strings(gotRequired)
	sort.Strings(wantRequired)
	if !slices.Equal(gotRequired, wantRequired) {
		c.errorf(where, "required = %q, want the fields without omitempty: %q", gotRequired, wantRequired)
	}
	ap, hasAP := node["additionalProperties"]
	switch {
	case c.strict && ap != false:
		c.errorf(where, "decoded strictly: additionalProperties must be false")
	case !c.strict && hasAP && ap == false:
		c.errorf(where, "sent by the host: additionalProperties must not be false, so newer hosts may add fields")
	}
}

// value checks a property schema against Go type typ.
func (c *schemaChecker) value(where string, node map[string]any, typ reflect.Type, omitempty bool) {
	c.t.Helper()
	var types []string
	switch v := node["type"].(type) {
	case string:
		types = []string{v}
	case []any:
		for _, e := range v {
			s, _ := e.(string)
			types = append(types, s)
		}
	}
	nullable := slices.Contains(types, "null")
	types = slices.DeleteFunc(types, func(s string) bool { return s == "null" })

	switch {
	case typ.Kind() == reflect.Pointer:
		// A strict decoder takes null for a nil pointer; a host sends null
		// for a nil pointer unless the field is omitempty.
		if !nullable && (c.strict || !omitempty) {
			c.errorf(where, "is a Go pointer (%v): its type must include \"null\"", typ)
		}
		typ = typ.Elem()
	case typ == rawMessageType || typ.Kind() == reflect.Interface:
		return // any JSON value
	case typ.Kind() == reflect.Slice:
		// encoding/json sends a nil slice as null: null is allowed.
	case nullable:
		c.errorf(where, "is not a Go pointer (%v): its type must not include \"null\"", typ)
	}

	var want string
	switch {
	case typ == rawMessageType:
		return
	case typ == timeType:
		want = "string"
		if node["format"] != "date-time" {
			c.errorf(where, "is a time: format must be date-time")
		}
	default:
		switch typ.Kind() {
		case reflect.String:
			want = "string"
		case reflect.Bool:
			want = "boolean"
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			want = "integer"
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			want = "integer"
			if m, ok := node["minimum"].(float64); !ok || m < 0 {
				c.errorf(where, "is unsigned (%v): minimum must be 0 or more", typ)
			}
		case reflect.Float32, reflect.Float64:
			want = "number"
		case reflect.Struct, reflect.Map:
			want = "object"
		case reflect.Slice, reflect.Array:
			want = "array"
			if typ.Elem().Kind() == reflect.Uint8 {
				want = "string" // base64
			}
		default:
			c.errorf(where, "has Go type %v, which has no JSON type", typ)
			return
		}
	}
	if len(types) != 1 || types[0] != want {
		c.errorf(where, "type = %q, want %q for Go type %v", types, want, typ)
		return
	}
	for _, v := range append(asSlice(node["enum"]), node["const"]) {
		if v != nil && jsonType(v) != want && !(want == "integer" && jsonType(v) == "number") {
			c.errorf(where, "enum or const value %v is not of type %s", v, want)
		}
	}
	switch want {
	case "object":
		if typ.Kind() == reflect.Struct {
			c.object(where, node, typ)
		}
	case "array":
		items, ok := node["items"].(map[string]any)
		if !ok {
			c.errorf(where, "is an array without items")
			return
		}
		c.value(where+"[]", items, typ.Elem(), false)
	}
}

func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "null"
}

func join(where, name string) string {
	if where == "" {
		return name
	}
	return where + "." + name
}
