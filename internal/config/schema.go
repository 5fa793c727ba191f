package config

import (
	"net/textproto"
	"reflect"
	"slices"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
)

// The structs of this package are the schema of the native file. A field is
// read from the key its yaml tag names (a field without one is not in the
// file) and decoded by its type: string, bool, int, float64, int64 (a byte
// size), time.Duration, []string, []time.Duration, map[string]any (scalars
// as YAML types them), a struct or a pointer to one (a mapping; a pointer is
// set even when the key is null, to a struct holding its defaults, see
// defaulter) and map[string]T (a mapping of names). The decode tag says what
// the type cannot:
//
//	secret     ${VAR} in the strings below looks in the entry's secrets first
//	           (a destination's), and substituted values are secrets
//	env        a mapping of scalars taken as written; substituted values are secrets
//	headers    env whose keys are canonicalised, ${VAR} as for secret
//	command    a list of strings, or one string split on white space (setCommand)
//	names      a list of strings, or one string
//	tokens     a client's tokens (setTokens)
//	code_mode  true, false or "only"
//	service    aws.service: may be left out (inferred) but not written empty
//	optional   a null value leaves the pointer nil
//	enable     a value that is not null sets the block's Enabled
//
// A min tag on a number is the least valid value; validate reports a smaller
// one (checkMins). A types tag on a key of a destination lists the types it
// is valid for; validate reports it set for another known type.

// schemaField is one key of a struct of the schema.
type schemaField struct {
	key   string // the yaml tag
	index int    // in the struct
	opt   string // the decode tag
}

var schemaFields sync.Map // reflect.Type -> []schemaField

// fieldsOf returns the keys of struct type t, in field order.
func fieldsOf(t reflect.Type) []schemaField {
	if fs, ok := schemaFields.Load(t); ok {
		return fs.([]schemaField)
	}
	var fs []schemaField
	for i := range t.NumField() {
		if key := t.Field(i).Tag.Get("yaml"); key != "" && key != "-" {
			fs = append(fs, schemaField{key, i, t.Field(i).Tag.Get("decode")})
		}
	}
	schemaFields.Store(t, fs)
	return fs
}

// A defaulter is a struct of the schema whose zero value is not its
// default; decoding a pointer to it starts from setDefaults.
type defaulter interface{ setDefaults() }

// decode decodes the mapping n into the struct *p.
func (d *decoder) decode(p any, n *yaml.Node, path string) {
	d.decodeStruct(reflect.ValueOf(p).Elem(), n, path, scope{}, nil)
}

// decodeStruct decodes the mapping n into the struct v, each key into the
// field it names, reporting unknown keys. pre, when not nil, sees each key
// first and reports whether it took it.
func (d *decoder) decodeStruct(v reflect.Value, n *yaml.Node, path string, sc scope, pre func(key string, v *yaml.Node, path string) bool) {
	fs := fieldsOf(v.Type())
	d.each(n, path, func(key string, n *yaml.Node, path string) {
		if pre != nil && pre(key, n, path) {
			return
		}
		if i := slices.IndexFunc(fs, func(f schemaField) bool { return f.key == key }); i >= 0 {
			d.decodeField(v.Field(fs[i].index), fs[i].opt, n, path, sc)
		} else {
			d.unknown(path, key)
		}
	})
}

// decodeField decodes n into the field v whose decode tag is opt.
func (d *decoder) decodeField(v reflect.Value, opt string, n *yaml.Node, path string, sc scope) {
	p, null := v.Addr().Interface(), isNull(resolve(n))
	switch opt {
	case "secret":
		sc = scope{secrets: d.ent, record: true}
	case "env":
		d.setStringMap(p.(*map[string]string), n, path, scope{record: true}, nil)
		return
	case "headers":
		d.setStringMap(p.(*map[string]string), n, path, scope{secrets: d.ent, record: true}, textproto.CanonicalMIMEHeaderKey)
		return
	case "command":
		d.setCommand(p.(*[]string), n, path)
		return
	case "names":
		d.setNameList(p.(*[]string), n, path)
		return
	case "tokens":
		d.setTokens(p.(*[]string), n, path, d.ent)
		return
	case "code_mode":
		d.setCodeMode(p.(*string), n, path)
		return
	case "service":
		if d.setString(p.(*string), n, path, sc); *p.(*string) == "" && !null && !d.failed[path] {
			d.errorf(n, path, "empty; leave the key out to infer the service from the host")
		}
		return
	case "optional":
		if null {
			return
		}
	case "enable":
		if !null {
			v.FieldByName("Enabled").SetBool(true)
		}
	case "":
	default:
		panic("config: unknown decode tag " + opt)
	}
	d.decodeValue(v, n, path, sc)
}

// decodeValue decodes n into v by v's type (see the top of this file).
func (d *decoder) decodeValue(v reflect.Value, n *yaml.Node, path string, sc scope) {
	switch p := v.Addr().Interface().(type) {
	case *string:
		d.setString(p, n, path, sc)
	case *bool:
		d.setBool(p, n, path)
	case *int:
		d.setInt(p, n, path)
	case *int64:
		d.setSize(p, n, path)
	case *float64:
		d.setFloat(p, n, path)
	case *time.Duration:
		d.setDuration(p, n, path)
	case *[]string:
		d.setStrings(p, n, path, sc)
	case *[]time.Duration:
		d.setDurations(p, n, path)
	case *map[string]any:
		d.setScalars(p, n, path)
	default:
		switch v.Kind() {
		case reflect.Struct:
			d.decodeStruct(v, n, path, sc, nil)
		case reflect.Pointer:
			e := reflect.New(v.Type().Elem())
			if def, ok := e.Interface().(defaulter); ok {
				def.setDefaults()
			}
			d.decodeStruct(e.Elem(), n, path, sc, nil)
			v.Set(e)
		case reflect.Map: // of names; made at the first
			d.each(n, path, func(key string, n *yaml.Node, kpath string) {
				if v.IsNil() {
					v.Set(reflect.MakeMap(v.Type()))
				}
				d.order[path] = append(d.order[path], key)
				e := reflect.New(v.Type().Elem()).Elem()
				d.decodeValue(e, n, kpath, sc)
				v.SetMapIndex(reflect.ValueOf(key), e)
			})
		default:
			panic("config: no decoder for " + v.Type().String())
		}
	}
}

// setCodeMode decodes a namespace's code_mode: true, false or "only".
func (d *decoder) setCodeMode(p *string, n *yaml.Node, path string) {
	switch n = resolve(n); {
	case isNull(n):
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool":
		var on bool
		if d.setBool(&on, n, path); on {
			*p = CodeModeOn
		}
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && n.Value == CodeModeOnly:
		*p = CodeModeOnly
	default:
		d.errorf(n, path, "expected true, false or only, got %s", describe(n))
	}
}

// setScalars decodes a mapping of scalars, each typed as YAML types it.
func (d *decoder) setScalars(p *map[string]any, n *yaml.Node, path string) {
	*p = map[string]any{}
	d.each(n, path, func(key string, v *yaml.Node, path string) {
		var x any
		if v = resolve(v); v.Kind != yaml.ScalarNode {
			d.typeErr(v, path, "a boolean, string or number")
		} else if err := v.Decode(&x); err != nil {
			d.errorf(v, path, "%v", err)
		} else {
			(*p)[key] = x
		}
	})
}
