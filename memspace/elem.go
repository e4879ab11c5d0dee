package memspace

import (
	"fmt"
	"reflect"
	"sync"
)

var elemCache sync.Map // reflect.Type -> error (nil stored as okElem)

type okElemT struct{}

var okElem okElemT

// CheckElem reports whether T may live outside the Go heap: a fixed-size,
// pointer-free type — a number, a bool, or an array or struct of them. User
// types such as `struct{ X, Y, Z, W float32 }` or `type Half uint16` are
// accepted. The answer is computed once per type. A bad type returns an
// error matching ErrBadElemType and ErrInvalidArgument.
func CheckElem[T any]() error {
	// The predeclared number types answer without the cache (a map lookup
	// that costs more than the rest of a small collective's checks).
	switch any((*T)(nil)).(type) {
	case *bool, *int8, *int16, *int32, *int64, *uint8, *uint16, *uint32, *uint64,
		*float32, *float64, *complex64, *complex128, *int, *uint, *uintptr:
		return nil
	}
	return checkType(reflect.TypeFor[T]())
}

func checkType(t reflect.Type) error {
	if v, ok := elemCache.Load(t); ok {
		if v == okElem {
			return nil
		}
		return v.(error)
	}
	err := walk(t, t.String())
	if err == nil && t.Size() == 0 {
		err = elemErr("it has size zero")
	}
	if err == nil {
		elemCache.Store(t, okElem)
	} else {
		err = fmt.Errorf("memspace: element type %s: %s: %w", t, err.Error(), ErrBadElemType)
		elemCache.Store(t, err)
	}
	return err
}

type elemErr string

func (e elemErr) Error() string { return string(e) }

func walk(t reflect.Type, path string) error {
	switch t.Kind() {
	case reflect.Bool,
		reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return nil
	case reflect.Int, reflect.Uint, reflect.Uintptr:
		// Platform-sized but pointer-free; a uintptr is only an integer here.
		return nil
	case reflect.Array:
		return walk(t.Elem(), path+"[]")
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if err := walk(f.Type, path+"."+f.Name); err != nil {
				return err
			}
		}
		return nil
	default:
		return elemErr(fmt.Sprintf("%s has kind %s, which holds pointers or has no fixed size", path, t.Kind()))
	}
}
