/* The C default of `kiln_debug_print` in an ahead-of-time library (pasted into the glue of
 * libraries whose functions print: kiln/compiler/aot/glue.py).
 *
 * Generated code calls `void kiln_debug_print(const char *site, void **operands)`
 * (lower_callbacks.py): `site` is a JSON object with the print's `fmt` (null for `print(...)`),
 * `template` (the pieces: `["v", i]` operand i, `["s", value]` a static value, `["kv", name, i]`
 * and `["ks", name, value]` keyword pieces), `sep`, `end`, and each operand's `[dtype.str,
 * shape]`; `operands[i]` points to operand i's data (contiguous, C order). kiln.aot.load binds
 * the Python callback (host_callbacks.py), which renders with NumPy's `str` and Python's
 * `str.format` (callbacks.render); this C version, for C programs, prints the same text to stdout
 * in the common cases:
 *
 * - arrays as NumPy's `str` with its default options (arrayprint's FloatingFormat and
 *   _formatArray): the shortest digits that read back (at most 8 after the point), points
 *   aligned, scientific notation from 1e3 (f16), 1e6 (f32), 1e8 (f64) or under 1e-4 or a range
 *   over 1000, integers right-aligned, `[ True False]`, lines wrapped at 75 characters, over
 *   1000 elements summarised (3 at each edge); complex numbers as ComplexFloatingFormat writes
 *   them (`[1.+2.j 0.-1.j]`: each part laid out over its own values, the imaginary one signed,
 *   its `j` before its padding); rank-0 values as NumPy scalars after `print` (`(1+2j)`, `1j`),
 *   as Python floats and complex numbers in format fields (Python formats `x.item()` there);
 * - `fmt` as `str.format` reads it: `{}`, `{0}`, `{name}`, `{{`, `}}`, conversions, and format
 *   specs (fill, align, sign, `#`, `0`, width, precision, types `b c d o x X n e E f F g G %` and
 *   `s`) on rank-0 operands and static values.
 * Differences (docs/aot.md, "Printing"): `!r` prints `str`; a spec on an array of rank 1 or more
 * is ignored; fields with attributes or indexes, nested specs, thousands separators, and fields
 * Python would reject are printed as written; a float with a precision and no type prints like
 * `g`; a format spec on a complex operand is printed as written (Python formats each part).
 *
 * The C parses the JSON (any JSON: strings with escapes, numbers, NaN and Infinity as Python's
 * json writes them), finds the shortest digits by printing with printf at increasing precision
 * (in each rounding direction) until strtod/strtof read the value back (float16 by its
 * neighbours), and builds the text in a growing buffer written with one fwrite under flockfile.
 */
#include <errno.h>
#include <fenv.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing string. */
typedef struct { char *data; size_t length, capacity; bool failed; } _kiln_text;

static void _kiln_append(_kiln_text *t, const char *s, size_t n) {
    if (t->failed) return;
    if (t->length + n + 1 > t->capacity) {
        size_t capacity = t->capacity ? t->capacity : 128;
        while (capacity < t->length + n + 1) capacity *= 2;
        char *data = realloc(t->data, capacity);
        if (!data) { t->failed = true; return; }
        t->data = data;
        t->capacity = capacity;
    }
    memcpy(t->data + t->length, s, n);
    t->length += n;
    t->data[t->length] = 0;
}

static void _kiln_add(_kiln_text *t, const char *s) { _kiln_append(t, s, strlen(s)); }

static void _kiln_repeat(_kiln_text *t, const char *s, long times) {
    for (; times > 0; times--) _kiln_add(t, s);
}

static const char *_kiln_str(const _kiln_text *t) { return t->data ? t->data : ""; }

/* Characters (UTF-8 code points) in s. */
static long _kiln_width(const char *s) {
    long n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* ------------------------------------------------------------------- the site's JSON */

enum { _KJ_NULL, _KJ_BOOL, _KJ_NUMBER, _KJ_STRING, _KJ_ARRAY, _KJ_OBJECT };

typedef struct _kiln_json {
    int type;
    bool truth;                 /* a boolean's value */
    char *text;                 /* a string (decoded) or a number as written */
    struct _kiln_json *items;   /* an array's items, an object's values */
    char **keys;                /* an object's keys */
    size_t count;
} _kiln_json;

static void _kj_free(_kiln_json *v) {
    for (size_t k = 0; k < v->count; k++) {
        _kj_free(&v->items[k]);
        if (v->keys) free(v->keys[k]);
    }
    free(v->items);
    free(v->keys);
    free(v->text);
}

static const char *_kj_space(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

static void _kj_utf8(_kiln_text *t, unsigned long c) {
    char b[4];
    if (c < 0x80) { b[0] = (char)c; _kiln_append(t, b, 1); }
    else if (c < 0x800) {
        b[0] = (char)(0xC0 | c >> 6); b[1] = (char)(0x80 | (c & 0x3F)); _kiln_append(t, b, 2);
    } else if (c < 0x10000) {
        b[0] = (char)(0xE0 | c >> 12); b[1] = (char)(0x80 | (c >> 6 & 0x3F));
        b[2] = (char)(0x80 | (c & 0x3F)); _kiln_append(t, b, 3);
    } else {
        b[0] = (char)(0xF0 | c >> 18); b[1] = (char)(0x80 | (c >> 12 & 0x3F));
        b[2] = (char)(0x80 | (c >> 6 & 0x3F)); b[3] = (char)(0x80 | (c & 0x3F));
        _kiln_append(t, b, 4);
    }
}

/* The four hex digits at p as *c; NULL if they are not. */
static const char *_kj_hex(const char *p, unsigned long *c) {
    *c = 0;
    for (int k = 0; k < 4; k++, p++) {
        int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
              : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10 : -1;
        if (d < 0) return NULL;
        *c = *c * 16 + (unsigned long)d;
    }
    return p;
}

/* The string whose opening quote is at p, decoded into *out; the end, or NULL. */
static const char *_kj_string(const char *p, char **out) {
    static const char plain[] = "\"\\/bfnrt", meant[] = "\"\\/\b\f\n\r\t";
    _kiln_text t = {0};
    _kiln_append(&t, "", 0);
    for (p++; *p != '"'; ) {
        if (!*p) goto fail;
        if (*p != '\\') { _kiln_append(&t, p++, 1); continue; }
        const char *escape = *++p ? strchr(plain, *p) : NULL;
        if (escape) { _kiln_append(&t, &meant[escape - plain], 1); p++; continue; }
        unsigned long c, low;
        if (*p != 'u' || !(p = _kj_hex(p + 1, &c))) goto fail;
        if (c >= 0xD800 && c < 0xDC00 && p[0] == '\\' && p[1] == 'u') {
            const char *q = _kj_hex(p + 2, &low);
            if (q && low >= 0xDC00 && low < 0xE000) {
                c = 0x10000 + ((c - 0xD800) << 10) + (low - 0xDC00);
                p = q;
            }
        }
        _kj_utf8(&t, c);
    }
    if (t.failed) goto fail;
    *out = t.data;
    return p + 1;
fail:
    free(t.data);
    return NULL;
}

static const char *_kj_value(const char *p, _kiln_json *v, int depth);

/* The items of the array or object at p (`close` is its closing bracket). */
static const char *_kj_items(const char *p, _kiln_json *v, char close, int depth) {
    p = _kj_space(p + 1);
    if (*p == close) return p + 1;
    for (size_t capacity = 0;; p = _kj_space(p + 1)) {
        if (v->count == capacity) {
            capacity = capacity ? 2 * capacity : 4;
            _kiln_json *items = realloc(v->items, capacity * sizeof *items);
            if (!items) return NULL;
            v->items = items;
            if (close == '}') {
                char **keys = realloc(v->keys, capacity * sizeof *keys);
                if (!keys) return NULL;
                v->keys = keys;
            }
        }
        _kiln_json *item = &v->items[v->count];
        memset(item, 0, sizeof *item);
        if (close == '}') {
            v->keys[v->count] = NULL;
            if (*p != '"' || !(p = _kj_string(p, &v->keys[v->count]))) {
                v->count++;
                return NULL;
            }
            p = _kj_space(p);
            if (*p++ != ':') { v->count++; return NULL; }
        }
        v->count++;
        if (!(p = _kj_value(_kj_space(p), item, depth + 1))) return NULL;
        p = _kj_space(p);
        if (*p == close) return p + 1;
        if (*p != ',') return NULL;
    }
}

static const char *_kj_value(const char *p, _kiln_json *v, int depth) {
    static const char *const words[] = {"null", "true", "false", "NaN", "Infinity", "-Infinity"};
    if (depth > 64) return NULL;
    if (*p == '"') { v->type = _KJ_STRING; return _kj_string(p, &v->text); }
    if (*p == '[' || *p == '{') {
        v->type = *p == '[' ? _KJ_ARRAY : _KJ_OBJECT;
        return _kj_items(p, v, *p == '[' ? ']' : '}', depth);
    }
    for (int k = 0; k < 6; k++) {
        size_t n = strlen(words[k]);
        if (strncmp(p, words[k], n) != 0) continue;
        v->type = k == 0 ? _KJ_NULL : k < 3 ? _KJ_BOOL : _KJ_NUMBER;
        v->truth = k == 1;
        if (k >= 3 && !(v->text = strdup(words[k]))) return NULL;
        return p + n;
    }
    const char *end = p + (*p == '-');
    while ((*end >= '0' && *end <= '9') || (*end && strchr(".eE+-", *end))) end++;
    if (end == p || (end == p + 1 && *p == '-')) return NULL;
    v->type = _KJ_NUMBER;
    if (!(v->text = strndup(p, (size_t)(end - p)))) return NULL;
    return end;
}

static const _kiln_json *_kj_get(const _kiln_json *object, const char *key) {
    for (size_t k = 0; object->type == _KJ_OBJECT && k < object->count; k++)
        if (strcmp(object->keys[k], key) == 0) return &object->items[k];
    return NULL;
}

static const char *_kj_text(const _kiln_json *v, const char *otherwise) {
    return v && v->type == _KJ_STRING ? v->text : otherwise;
}

/* ------------------------------------------------------------------------ operands */

typedef struct {
    char kind;                /* NumPy's dtype kind: b i u f c (anything else cannot print) */
    int size;                 /* bytes per element (per part for a part of complex numbers) */
    int step;                 /* bytes from one element to the next */
    const char *dtype;        /* dtype.str, e.g. "<f4" */
    int rank;
    int64_t shape[64], count;
    const unsigned char *data;
} _kiln_operand;

static bool _kiln_operand_of(const _kiln_json *spec, const void *data, _kiln_operand *a) {
    if (!spec || spec->type != _KJ_ARRAY || spec->count != 2) return false;
    const _kiln_json *dtype = &spec->items[0], *shape = &spec->items[1];
    if (dtype->type != _KJ_STRING || shape->type != _KJ_ARRAY || shape->count > 64) return false;
    a->dtype = dtype->text;
    a->kind = strlen(dtype->text) >= 3 && dtype->text[0] != '>' ? dtype->text[1] : '?';
    a->size = a->step = a->kind == '?' ? 0 : atoi(dtype->text + 2);
    a->rank = (int)shape->count;
    a->count = 1;
    for (int d = 0; d < a->rank; d++) {
        if (shape->items[d].type != _KJ_NUMBER) return false;
        a->shape[d] = strtoll(shape->items[d].text, NULL, 10);
        a->count *= a->shape[d];
    }
    a->data = data;
    return true;
}

static bool _kiln_printable(const _kiln_operand *a) {
    switch (a->kind) {
    case 'b': return a->size == 1;
    case 'i': case 'u': return a->size == 1 || a->size == 2 || a->size == 4 || a->size == 8;
    case 'f': return a->size == 2 || a->size == 4 || a->size == 8;
    case 'c': return a->size == 8 || a->size == 16;
    default: return false;
    }
}

/* The real (imag false) or imaginary parts of complex operand `a`, as a float operand. */
static _kiln_operand _kiln_part(const _kiln_operand *a, bool imag) {
    _kiln_operand part = *a;
    part.kind = 'f';
    part.size = a->size / 2;
    part.data = a->data + (imag ? part.size : 0);
    return part;
}

static double _kiln_half(uint16_t h) {
    int exponent = h >> 10 & 0x1F, mantissa = h & 0x3FF;
    double magnitude = exponent == 0 ? ldexp(mantissa, -24)
                     : exponent == 31 ? (mantissa ? NAN : INFINITY)
                     : ldexp(mantissa | 0x400, exponent - 25);
    return h & 0x8000 ? -magnitude : magnitude;
}

static double _kiln_float_at(const _kiln_operand *a, int64_t i) {
    const unsigned char *p = a->data + i * a->step;
    uint16_t h; float f; double d;
    if (a->size == 2) { memcpy(&h, p, 2); return _kiln_half(h); }
    if (a->size == 4) { memcpy(&f, p, 4); return f; }
    memcpy(&d, p, 8);
    return d;
}

static long long _kiln_int_at(const _kiln_operand *a, int64_t i) {
    const unsigned char *p = a->data + i * a->size;
    int8_t b; int16_t s; int32_t w; int64_t l;
    switch (a->size) {
    case 1: memcpy(&b, p, 1); return a->kind == 'i' ? b : (uint8_t)b;
    case 2: memcpy(&s, p, 2); return a->kind == 'i' ? s : (uint16_t)s;
    case 4: memcpy(&w, p, 4); return a->kind == 'i' ? w : (long long)(uint32_t)w;
    default: memcpy(&l, p, 8); return l;
    }
}

/* Element i as decimal text (64-bit unsigned integers included). */
static void _kiln_int_text(char *out, size_t n, const _kiln_operand *a, int64_t i) {
    long long v = _kiln_int_at(a, i);
    if (a->kind == 'u' && a->size == 8) snprintf(out, n, "%llu", (unsigned long long)v);
    else snprintf(out, n, "%lld", v);
}

/* --------------------------------------------------------------------- float digits */

/* Whether the decimal text s reads back as x, a value of a `size`-byte float. */
static bool _kiln_reads_back(const char *s, double x, int size) {
    double d = strtod(s, NULL);
    if (size == 8 || d == x) return d == x;
    if (size == 4) return strtof(s, NULL) == (float)x;
    /* float16: d must be nearer to x than to the neighbouring halves (a tie to an even one) */
    double m = fabs(x), e = fabs(d);
    if (x != 0 && signbit(d) != signbit(x)) return false;
    int binade = m < 0x1p-14 ? -14 : ilogb(m);
    double ulp = ldexp(1, binade - 10);
    double below = binade > -14 && m == ldexp(1, binade) ? ulp / 2 : ulp;
    bool even = fmod(m / ldexp(1, binade > -14 ? binade - 10 : -24), 2) == 0;
    double gap = e >= m ? e - m : m - e, limit = (e >= m ? ulp : below) / 2;
    return even ? gap <= limit : gap < limit;
}

/* x with p digits after the point that reads back as x: rounded to nearest, else (a tie or
 * nearly) up or down; false if none does. */
static bool _kiln_digits(char *out, size_t n, const char *format, int p, double x, int size) {
    static const int directions[] = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD};
    int mode = fegetround();
    bool ok = false;
    for (int k = 0; k < 3 && !ok; k++) {
        fesetround(directions[k]);   /* glibc's printf rounds in the current direction */
        snprintf(out, n, format, p, x);
        fesetround(mode);
        ok = _kiln_reads_back(out, x, size);
    }
    return ok;
}

/* x with the fewest digits after the point (printf's 'f' or 'e' conversion, at most `limit`)
 * that read back as x, trailing zeros after the point removed (the point kept); with a sign
 * when `plus`. */
static void _kiln_shortest(char *out, size_t n, double x, int size, char conversion, int limit,
                           bool plus) {
    const char *format = conversion == 'f' ? (plus ? "%+.*f" : "%.*f")
                                           : (plus ? "%+.*e" : "%.*e");
    int p = 0;
    while (p < limit && !_kiln_digits(out, n, format, p, x, size)) p++;
    if (p == limit) snprintf(out, n, format, p, x);
    char *point = strchr(out, '.');
    if (!point) return;
    char *exponent = strchr(out, 'e'), *end = exponent ? exponent : out + strlen(out), *last = end;
    while (last > point + 1 && last[-1] == '0') last--;
    memmove(last, end, strlen(end) + 1);
}

/* NumPy's str of a float scalar of `size` bytes (Python's repr for 8): 1.5, 2.0, 1e-05, 1e+06
 * (scientific from 1e3 for float16, 1e6 for float32, 1e16 for float64). */
static void _kiln_float_repr(_kiln_text *t, double x, int size) {
    char s[512];
    if (isnan(x) || isinf(x)) { _kiln_add(t, isnan(x) ? "nan" : x < 0 ? "-inf" : "inf"); return; }
    double m = fabs(x);
    bool scientific = m != 0 && (m < 1e-4 || m >= (size == 2 ? 1e3 : size == 4 ? 1e6 : 1e16));
    _kiln_shortest(s, sizeof s, x, size, scientific ? 'e' : 'f', scientific ? 17 : 340, false);
    char *point = strchr(s, '.');
    if (scientific && point && point[1] == 'e') memmove(point, point + 1, strlen(point));
    _kiln_add(t, s);
    if (!scientific) _kiln_add(t, !point ? ".0" : point[1] ? "" : "0");
}

/* A part of a complex number as NumPy's and Python's complex str write it: the float's str
 * without a ".0", with a sign when `plus` ("+nan" for any NaN). */
static void _kiln_part_repr(_kiln_text *t, double x, int size, bool plus) {
    _kiln_text s = {0};
    _kiln_float_repr(&s, x, size);
    size_t n = s.length;
    if (n >= 2 && strcmp(_kiln_str(&s) + n - 2, ".0") == 0) n -= 2;
    if (plus && (isnan(x) || !signbit(x))) _kiln_add(t, "+");
    _kiln_append(t, _kiln_str(&s), n);
    free(s.data);
}

/* The str of a float or complex scalar `a` with parts of `size` bytes: NumPy's (a's own size)
 * or Python's (8): `(1+2j)`, `1j` (a real part of +0 is left out), `(nan-infj)`. */
static void _kiln_inexact_repr(_kiln_text *t, const _kiln_operand *a, int size) {
    if (a->kind == 'f') { _kiln_float_repr(t, _kiln_float_at(a, 0), size); return; }
    _kiln_operand re = _kiln_part(a, false), im = _kiln_part(a, true);
    double x = _kiln_float_at(&re, 0), y = _kiln_float_at(&im, 0);
    bool both = x != 0 || signbit(x);
    if (both) { _kiln_add(t, "("); _kiln_part_repr(t, x, size, false); }
    _kiln_part_repr(t, y, size, both);
    _kiln_add(t, both ? "j)" : "j");
}

/* ------------------------------------------------------------- NumPy's str of arrays */

typedef struct _kiln_printer {
    const _kiln_operand *a;
    int64_t stride[64];
    bool summary;               /* over 1000 elements: 3 at each edge of each axis */
    /* floats, as NumPy's FloatingFormat: what the shown elements hold, then the layout */
    double low, high;           /* the least and greatest finite non-zero magnitudes */
    bool finite, nan, inf, neginf, scientific;
    bool plus;                  /* signs on every value (a complex number's imaginary parts) */
    int precision, pad_left, pad_right, exp_digits;
    int width;                  /* integers: the widest */
    const struct _kiln_printer *parts[2];   /* complex: the layouts of the two parts */
} _kiln_printer;

typedef void (*_kiln_visit)(_kiln_printer *p, int64_t i);

/* Calls visit for each element shown (every one, or the edges when summarising). */
static void _kiln_each_shown(_kiln_printer *p, int axis, int64_t offset, _kiln_visit visit) {
    if (axis == p->a->rank) { visit(p, offset); return; }
    int64_t n = p->a->shape[axis];
    for (int64_t i = 0; i < n; i++) {
        if (p->summary && n > 6 && i == 3) i = n - 3;
        _kiln_each_shown(p, axis + 1, offset + i * p->stride[axis], visit);
    }
}

static void _kiln_scan_float(_kiln_printer *p, int64_t i) {
    double x = _kiln_float_at(p->a, i), m = fabs(x);
    if (isnan(x)) p->nan = true;
    else if (isinf(x)) { p->inf = true; p->neginf |= x < 0; }
    else {
        p->finite = true;
        if (m != 0 && m < p->low) p->low = m;
        if (m > p->high) p->high = m;
    }
}

/* The lengths of a float's integer part (with its sign), fraction and exponent digits. */
static void _kiln_parts(const char *s, int *whole, int *fraction, int *exponent) {
    const char *point = strchr(s, '.'), *e = strchr(s, 'e');
    const char *end = e ? e : s + strlen(s);
    *whole = (int)((point ? point : end) - s);
    *fraction = point ? (int)(end - point - 1) : 0;
    *exponent = e ? (int)strlen(e + 2) : 0;
}

static void _kiln_measure_float(_kiln_printer *p, int64_t i) {
    double x = _kiln_float_at(p->a, i);
    char s[512];
    int whole, fraction, exponent;
    if (!isfinite(x)) return;
    _kiln_shortest(s, sizeof s, x, p->a->size, p->scientific ? 'e' : 'f', 8, p->plus);
    _kiln_parts(s, &whole, &fraction, &exponent);
    if (whole > p->pad_left) p->pad_left = whole;
    if (fraction > p->pad_right) p->pad_right = fraction;
    if (exponent > p->exp_digits) p->exp_digits = exponent;
}

static void _kiln_measure_int(_kiln_printer *p, int64_t i) {
    char s[32];
    _kiln_int_text(s, sizeof s, p->a, i);
    if ((int)strlen(s) > p->width) p->width = (int)strlen(s);
}

/* NumPy's layout of the floats shown: scientific when the largest magnitude reaches 1e3 (f16),
 * 1e6 (f32) or 1e8 (f64), or the smallest non-zero one is under 1e-4, or they differ by more
 * than a factor 1000; the shortest digits that read back, up to 8 after the point; points
 * aligned (in scientific notation every mantissa gets as many digits as the longest). */
static void _kiln_float_layout(_kiln_printer *p) {
    double cutoff = p->a->size == 2 ? 1e3 : p->a->size == 4 ? 1e6 : 1e8;
    p->low = INFINITY;
    _kiln_each_shown(p, 0, 0, _kiln_scan_float);
    p->scientific = p->high != 0 && (p->high >= cutoff || p->low < 1e-4 || p->high / p->low > 1e3);
    _kiln_each_shown(p, 0, 0, _kiln_measure_float);
    if (p->finite && p->scientific) {
        p->precision = p->pad_right;
        p->pad_right = p->exp_digits + 2 + p->precision;
    }
    if (p->nan || p->inf) {   /* (with signs, room for one as if some inf were negative) */
        int offset = p->pad_right + 1, wide = 3 + (p->neginf || p->plus) - offset;
        if (wide > p->pad_left) p->pad_left = wide;
    }
}

static void _kiln_float_element(_kiln_text *t, const _kiln_printer *p, double x) {
    char s[512];
    int whole, fraction, exponent;
    if (!isfinite(x)) {
        const char *text = isnan(x) ? (p->plus ? "+nan" : "nan")
                         : x < 0 ? "-inf" : p->plus ? "+inf" : "inf";
        _kiln_repeat(t, " ", p->pad_left + p->pad_right + 1 - (long)strlen(text));
        _kiln_add(t, text);
        return;
    }
    if (p->scientific) snprintf(s, sizeof s, p->plus ? "%+.*e" : "%.*e", p->precision, x);
    else _kiln_shortest(s, sizeof s, x, p->a->size, 'f', 8, p->plus);
    _kiln_parts(s, &whole, &fraction, &exponent);
    _kiln_repeat(t, " ", p->pad_left - whole);
    _kiln_append(t, s, (size_t)whole);
    _kiln_add(t, ".");
    _kiln_append(t, s + whole + 1, (size_t)(fraction > 0 ? fraction : 0));
    if (!p->scientific) { _kiln_repeat(t, " ", p->pad_right - fraction); return; }
    const char *e = strchr(s, 'e');
    _kiln_append(t, e, 2);
    _kiln_repeat(t, "0", p->exp_digits - exponent);
    _kiln_add(t, e + 2);
}

/* NumPy's complex element: the real part, then the imaginary part with its sign and a `j`
 * before its padding, each laid out over its own values. */
static void _kiln_complex_element(_kiln_text *t, const _kiln_printer *p, int64_t i) {
    const _kiln_printer *re = p->parts[0], *im = p->parts[1];
    _kiln_float_element(t, re, _kiln_float_at(re->a, i));
    size_t start = t->length, end;
    _kiln_float_element(t, im, _kiln_float_at(im->a, i));
    if (t->failed) return;
    for (end = t->length; end > start && t->data[end - 1] == ' '; end--) {}
    long spaces = (long)(t->length - end);
    t->length = end;
    _kiln_add(t, "j");
    _kiln_repeat(t, " ", spaces);
}

static void _kiln_element(_kiln_text *t, const _kiln_printer *p, int64_t i) {
    char s[32];
    if (p->a->kind == 'f') { _kiln_float_element(t, p, _kiln_float_at(p->a, i)); return; }
    if (p->a->kind == 'c') { _kiln_complex_element(t, p, i); return; }
    if (p->a->kind == 'b') { _kiln_add(t, _kiln_int_at(p->a, i) ? " True" : "False"); return; }
    _kiln_int_text(s, sizeof s, p->a, i);
    _kiln_repeat(t, " ", p->width - (long)strlen(s));
    _kiln_add(t, s);
}

/* NumPy's _extendLine: `word` onto `line`, which first goes to `s` when `word` would make it
 * wider than `width` (a line holds at least one word). */
static void _kiln_extend(_kiln_text *s, _kiln_text *line, const char *word, long width,
                         int indent) {
    if ((long)line->length + (long)strlen(word) > width && (long)line->length > indent) {
        size_t n = line->length;
        while (n > 0 && line->data[n - 1] == ' ') n--;
        _kiln_append(s, _kiln_str(line), n);
        _kiln_add(s, "\n");
        line->length = 0;
        _kiln_repeat(line, " ", indent);
    }
    _kiln_add(line, word);
}

/* NumPy's _formatArray: the brackets and line breaks of axis `axis` and below. */
static void _kiln_format_axis(_kiln_text *out, const _kiln_printer *p, int axis, int64_t offset,
                              long width) {
    int indent = axis + 1, rank = p->a->rank;
    int64_t n = p->a->shape[axis];
    bool cut = p->summary && n > 6;
    _kiln_text s = {0}, line = {0}, word = {0};
    _kiln_repeat(axis == rank - 1 ? &line : &s, " ", indent);
    for (int64_t i = 0; i < n; i++) {
        if (cut && i == 3) {
            if (axis == rank - 1) {
                _kiln_extend(&s, &line, "...", width - 1, indent);
                _kiln_add(&line, " ");
            } else {
                _kiln_add(&s, "...");
                _kiln_repeat(&s, "\n", rank - axis - 1);
                _kiln_repeat(&s, " ", indent);
            }
            i = n - 3;
        }
        if (axis == rank - 1) {
            word.length = 0;
            _kiln_element(&word, p, offset + i);
            _kiln_extend(&s, &line, _kiln_str(&word), width - 1, indent);
            if (i < n - 1) _kiln_add(&line, " ");
        } else {
            _kiln_format_axis(&s, p, axis + 1, offset + i * p->stride[axis], width - 1);
            if (i < n - 1) {
                _kiln_repeat(&s, "\n", rank - axis - 1);
                _kiln_repeat(&s, " ", indent);
            }
        }
    }
    _kiln_append(&s, _kiln_str(&line), line.length);
    _kiln_add(out, "[");
    _kiln_append(out, _kiln_str(&s) + indent, s.length - (size_t)indent);
    _kiln_add(out, "]");
    free(s.data);
    free(line.data);
    free(word.data);
}

/* str() of an operand, as NumPy prints it. */
static void _kiln_array_str(_kiln_text *t, const _kiln_operand *a) {
    char s[32];
    if (!_kiln_printable(a)) {
        _kiln_add(t, "<");
        _kiln_add(t, a->dtype);
        _kiln_add(t, " array>");
        return;
    }
    if (a->rank == 0) {
        if (a->kind == 'f') _kiln_inexact_repr(t, a, a->size);
        else if (a->kind == 'c') _kiln_inexact_repr(t, a, a->size / 2);
        else if (a->kind == 'b') _kiln_add(t, _kiln_int_at(a, 0) ? "True" : "False");
        else { _kiln_int_text(s, sizeof s, a, 0); _kiln_add(t, s); }
        return;
    }
    if (a->count == 0) { _kiln_add(t, "[]"); return; }
    _kiln_printer p;
    memset(&p, 0, sizeof p);
    p.a = a;
    p.summary = a->count > 1000;
    for (int d = a->rank - 1; d >= 0; d--)
        p.stride[d] = d == a->rank - 1 ? 1 : p.stride[d + 1] * a->shape[d + 1];
    _kiln_operand parts[2];
    _kiln_printer layouts[2];
    for (int k = 0; k < 2 && a->kind == 'c'; k++) {   /* each part laid out on its own */
        parts[k] = _kiln_part(a, k == 1);
        layouts[k] = p;
        layouts[k].a = &parts[k];
        layouts[k].plus = k == 1;
        _kiln_float_layout(&layouts[k]);
        p.parts[k] = &layouts[k];
    }
    if (a->kind == 'f') _kiln_float_layout(&p);
    else if (a->kind == 'i' || a->kind == 'u') _kiln_each_shown(&p, 0, 0, _kiln_measure_int);
    _kiln_format_axis(t, &p, 0, 0, 75);
}

/* ------------------------------------------------------------- Python's str.format */

/* A piece of the print: an operand, or a static value of the site (JSON). */
typedef struct { const _kiln_operand *operand; const _kiln_json *value; } _kiln_piece;

static void _kiln_piece_str(_kiln_text *t, const _kiln_piece *piece) {
    const _kiln_json *v = piece->value;
    if (piece->operand) { _kiln_array_str(t, piece->operand); return; }
    if (v->type == _KJ_BOOL) { _kiln_add(t, v->truth ? "True" : "False"); return; }
    if (v->type == _KJ_NULL) { _kiln_add(t, "None"); return; }
    if (v->type == _KJ_NUMBER && strcmp(v->text, "NaN") == 0) { _kiln_add(t, "nan"); return; }
    if (v->type == _KJ_NUMBER && strstr(v->text, "Infinity")) {
        _kiln_add(t, v->text[0] == '-' ? "-inf" : "inf");
        return;
    }
    _kiln_add(t, v->text ? v->text : "?");
}

typedef struct {
    char fill[8], align, sign, type;
    bool alternate;
    long width, precision;
} _kiln_spec;

/* Python's format spec [[fill]align][sign][z][#][0][width][.precision][type]; false for
 * anything else (thousands separators included). */
static bool _kiln_parse_spec(const char *s, _kiln_spec *f) {
    memset(f, 0, sizeof *f);
    strcpy(f->fill, " ");
    f->precision = -1;
    size_t first = 1;
    while (s[0] && s[first] && ((unsigned char)s[first] & 0xC0) == 0x80) first++;
    if (s[0] && s[first] && strchr("<>=^", s[first]) && first < sizeof f->fill) {
        memcpy(f->fill, s, first);
        f->fill[first] = 0;
        f->align = s[first];
        s += first + 1;
    } else if (*s && strchr("<>=^", *s)) f->align = *s++;
    if (*s && strchr("+- ", *s)) f->sign = *s++;
    if (*s == 'z') s++;
    if (*s == '#') { f->alternate = true; s++; }
    if (*s == '0') {
        if (!f->align) { strcpy(f->fill, "0"); f->align = '='; }
        s++;
    }
    for (; *s >= '0' && *s <= '9'; s++) f->width = f->width * 10 + (*s - '0');
    if (*s == '.') {
        if (*++s < '0' || *s > '9') return false;
        for (f->precision = 0; *s >= '0' && *s <= '9'; s++)
            f->precision = f->precision * 10 + (*s - '0');
    }
    if (*s && strchr("bcdeEfFgGnosxX%", *s)) f->type = *s++;
    return *s == 0 && f->width < 4096 && f->precision < 1000;
}

/* Pads `sign` + `prefix` + `body` to the spec's width. */
static void _kiln_pad(_kiln_text *t, const _kiln_spec *f, const char *sign, const char *prefix,
                      const char *body, char default_align) {
    long pad = f->width - _kiln_width(sign) - _kiln_width(prefix) - _kiln_width(body);
    char align = f->align ? f->align : default_align;
    long before = pad <= 0 ? 0 : align == '>' ? pad : align == '^' ? pad / 2 : 0;
    long after = pad <= 0 ? 0 : align == '<' ? pad : align == '^' ? pad - pad / 2 : 0;
    if (align != '=') _kiln_repeat(t, f->fill, before);
    _kiln_add(t, sign);
    _kiln_add(t, prefix);
    if (align == '=') _kiln_repeat(t, f->fill, pad);
    _kiln_add(t, body);
    _kiln_repeat(t, f->fill, after);
}

static const char *_kiln_sign(const _kiln_spec *f, bool negative) {
    return negative ? "-" : f->sign == '+' ? "+" : f->sign == ' ' ? " " : "";
}

static bool _kiln_format_float(_kiln_text *t, const _kiln_spec *f, double x) {
    char body[4200], conversion[8];
    char type = f->type == 'n' ? 'g' : f->type;
    bool upper = type == 'E' || type == 'F' || type == 'G';
    double m = fabs(x);
    if (!strchr("eEfFgG%", type ? type : 'g')) return false;
    if (isnan(x) || isinf(x)) {
        snprintf(body, sizeof body, "%s%s", isnan(x) ? (upper ? "NAN" : "nan")
                 : (upper ? "INF" : "inf"), type == '%' ? "%" : "");
    } else if (!type && f->precision < 0) {
        _kiln_text repr = {0};
        _kiln_float_repr(&repr, m, 8);
        snprintf(body, sizeof body, "%s", _kiln_str(&repr));
        free(repr.data);
    } else {
        snprintf(conversion, sizeof conversion, "%%%s.*%c", f->alternate ? "#" : "",
                 type == '%' ? 'f' : type ? type : 'g');
        snprintf(body, sizeof body, conversion, (int)(f->precision < 0 ? 6 : f->precision),
                 type == '%' ? m * 100 : m);
        if (type == '%') strcat(body, "%");
    }
    _kiln_pad(t, f, _kiln_sign(f, !isnan(x) && signbit(x)), "", body, '>');
    return true;
}

static bool _kiln_format_int(_kiln_text *t, const _kiln_spec *f, bool negative,
                             unsigned long long magnitude) {
    static const char *const prefixes[] = {"0b", "0o", "0x", "0X"};
    char body[80] = "", *p = body + sizeof body - 1;
    int base = f->type == 'b' ? 2 : f->type == 'o' ? 8 : f->type == 'x' || f->type == 'X' ? 16 : 10;
    if (f->type && strchr("eEfFgG%", f->type)) {
        double x = (double)magnitude;
        return _kiln_format_float(t, f, negative ? -x : x);
    }
    if (f->type == 'c') {
        _kiln_text c = {0};
        _kj_utf8(&c, (unsigned long)magnitude);
        _kiln_pad(t, f, "", "", _kiln_str(&c), '<');
        free(c.data);
        return !negative && magnitude < 0x110000;
    }
    if (f->type == 's' || f->precision >= 0) return false;
    *p = 0;
    do *--p = "0123456789abcdef"[magnitude % base]; while (magnitude /= base);
    for (char *q = p; f->type == 'X' && *q; q++) if (*q >= 'a') *q = (char)(*q - 32);
    const char *prefix = !f->alternate || base == 10 ? ""
                       : prefixes[base == 2 ? 0 : base == 8 ? 1 : f->type == 'x' ? 2 : 3];
    _kiln_pad(t, f, _kiln_sign(f, negative), prefix, p, '>');
    return true;
}

static bool _kiln_format_string(_kiln_text *t, const _kiln_spec *f, const char *s) {
    if ((f->type && f->type != 's') || f->sign || f->alternate || f->align == '=') return false;
    _kiln_text cut = {0};
    long count = 0;
    const char *end = s;
    for (; *end; end++) {
        bool starts = ((unsigned char)*end & 0xC0) != 0x80;
        if (starts && f->precision >= 0 && count == f->precision) break;
        count += starts;
    }
    _kiln_append(&cut, s, (size_t)(end - s));
    _kiln_pad(t, f, "", "", _kiln_str(&cut), '<');
    free(cut.data);
    return true;
}

/* format(piece, spec) as Python computes it; false where this version cannot. */
static bool _kiln_format_piece(_kiln_text *t, const _kiln_piece *piece, const char *text) {
    _kiln_spec f;
    const _kiln_operand *a = piece->operand;
    const _kiln_json *v = piece->value;
    if (a && a->rank == 0 && strchr("fc", a->kind) && !*text && _kiln_printable(a)) {
        _kiln_inexact_repr(t, a, 8);   /* format(x.item(), ''): a Python float or complex */
        return true;
    }
    if (!*text || (a && a->rank > 0)) {
        _kiln_piece_str(t, piece);
        return true;
    }
    if (!_kiln_parse_spec(text, &f)) return false;
    if (a && (!_kiln_printable(a) || a->kind == 'c')) return false;
    if (a && a->kind == 'f') return _kiln_format_float(t, &f, _kiln_float_at(a, 0));
    if (a) {
        long long x = _kiln_int_at(a, 0);
        bool big = a->kind == 'u' && a->size == 8;
        unsigned long long magnitude = (unsigned long long)x;
        return _kiln_format_int(t, &f, !big && x < 0, big || x >= 0 ? magnitude : 0 - magnitude);
    }
    if (v->type == _KJ_STRING) return _kiln_format_string(t, &f, v->text);
    if (v->type == _KJ_BOOL) return _kiln_format_int(t, &f, false, v->truth);
    if (v->type != _KJ_NUMBER) return false;
    if (strpbrk(v->text, ".eEIN")) return _kiln_format_float(t, &f, strtod(v->text, NULL));
    errno = 0;
    long long x = strtoll(v->text, NULL, 10);
    if (errno) return false;
    return _kiln_format_int(t, &f, x < 0, x < 0 ? 0ULL - (unsigned long long)x
                                                : (unsigned long long)x);
}

typedef struct {
    _kiln_piece *positional, *keyword;
    const char **names;
    size_t positionals, keywords;
} _kiln_pieces;

/* One replacement field (the text between the braces) of the format string. */
static void _kiln_field(_kiln_text *t, const _kiln_pieces *pieces, const char *field,
                        size_t length, size_t *next) {
    char name[256];
    const char *end = field + length, *stop = field, *spec = NULL;
    while (stop < end && *stop != '!' && *stop != ':') stop++;
    size_t n = (size_t)(stop - field);
    bool ok = n < sizeof name;
    if (stop < end && *stop == '!') {   /* !s, !r, !a: all print str */
        ok = ok && stop + 1 < end && strchr("rsa", stop[1]) && (stop + 2 == end || stop[2] == ':');
        spec = stop + 2 < end ? stop + 2 : NULL;
    } else if (stop < end) spec = stop;
    const _kiln_piece *piece = NULL;
    if (ok) {
        memcpy(name, field, n);
        name[n] = 0;
        if (n == 0) piece = *next < pieces->positionals ? &pieces->positional[(*next)++] : NULL;
        else if (strspn(name, "0123456789") == n) {
            size_t k = strtoul(name, NULL, 10);
            piece = k < pieces->positionals ? &pieces->positional[k] : NULL;
        }
        for (size_t k = 0; !piece && k < pieces->keywords; k++)
            if (strcmp(pieces->names[k], name) == 0) piece = &pieces->keyword[k];
    }
    char *spec_text = spec ? strndup(spec + 1, (size_t)(end - spec - 1)) : strdup("");
    size_t before = t->length;
    if (!piece || !spec_text || !_kiln_format_piece(t, piece, spec_text)) {
        t->length = before;
        _kiln_add(t, "{");
        _kiln_append(t, field, length);
        _kiln_add(t, "}");
    }
    free(spec_text);
}

/* fmt.format(*positional, **keyword), as Python reads fmt. */
static void _kiln_format(_kiln_text *t, const char *fmt, const _kiln_pieces *pieces) {
    size_t next = 0;
    while (*fmt) {
        if ((fmt[0] == '{' && fmt[1] == '{') || (fmt[0] == '}' && fmt[1] == '}')) {
            _kiln_append(t, fmt, 1);
            fmt += 2;
        } else if (*fmt == '{') {
            const char *end = fmt + 1;
            int depth = 1;
            bool nested = false;
            for (; *end && depth; end += depth > 0) {
                if (*end == '{') { depth++; nested = true; }
                else if (*end == '}') depth--;
            }
            if (depth) { _kiln_add(t, fmt); return; }
            if (nested) _kiln_append(t, fmt, (size_t)(end - fmt + 1));
            else _kiln_field(t, pieces, fmt + 1, (size_t)(end - fmt - 1), &next);
            fmt = end + 1;
        } else {
            _kiln_append(t, fmt++, 1);
        }
    }
}

/* The text of one print: the site's JSON (see the top of this file) and the
 * operands' data. */
static void _kiln_print_text(_kiln_text *t, const _kiln_json *site, void **data) {
    const _kiln_json *operands = _kj_get(site, "operands"), *template = _kj_get(site, "template");
    const _kiln_json *fmt = _kj_get(site, "fmt");
    size_t count = operands && operands->type == _KJ_ARRAY ? operands->count : 0;
    size_t pieces_count = template && template->type == _KJ_ARRAY ? template->count : 0;
    _kiln_operand *arrays = calloc(count + 1, sizeof *arrays);
    _kiln_pieces pieces = {calloc(pieces_count + 1, sizeof(_kiln_piece)),
                           calloc(pieces_count + 1, sizeof(_kiln_piece)),
                           calloc(pieces_count + 1, sizeof(char *)), 0, 0};
    bool ok = arrays && pieces.positional && pieces.keyword && pieces.names;
    for (size_t k = 0; ok && k < count; k++)
        ok = _kiln_operand_of(&operands->items[k], data[k], &arrays[k]);
    for (size_t k = 0; ok && k < pieces_count; k++) {
        const _kiln_json *entry = &template->items[k];
        bool pair = entry->type == _KJ_ARRAY && entry->count >= 2;
        const char *kind = pair ? _kj_text(&entry->items[0], "") : "";
        bool keyword = kind[0] == 'k';
        const _kiln_json *value = &entry->items[entry->count - 1];
        _kiln_piece piece = {NULL, value};
        if (strcmp(kind + keyword, "v") == 0) {
            size_t index = value->type == _KJ_NUMBER ? strtoul(value->text, NULL, 10) : count;
            ok = index < count;
            piece = (_kiln_piece){ok ? &arrays[index] : NULL, NULL};
        } else ok = strcmp(kind + keyword, "s") == 0;
        if (keyword) {
            ok = ok && entry->count == 3 && entry->items[1].type == _KJ_STRING;
            pieces.names[pieces.keywords] = ok ? entry->items[1].text : "";
            pieces.keyword[pieces.keywords++] = piece;
        } else {
            pieces.positional[pieces.positionals++] = piece;
        }
    }
    if (!ok) _kiln_add(t, "kiln debug_print: cannot read the print site\n");
    else if (fmt && fmt->type == _KJ_STRING) {
        _kiln_format(t, fmt->text, &pieces);
        _kiln_add(t, _kj_text(_kj_get(site, "end"), "\n"));
    } else {
        for (size_t k = 0; k < pieces.positionals; k++) {
            if (k) _kiln_add(t, _kj_text(_kj_get(site, "sep"), " "));
            _kiln_piece_str(t, &pieces.positional[k]);
        }
        _kiln_add(t, _kj_text(_kj_get(site, "end"), "\n"));
    }
    free(arrays);
    free(pieces.positional);
    free(pieces.keyword);
    free(pieces.names);
}

static void _kiln_default_debug_print(const char *site, void **operands) {
    _kiln_json root;
    _kiln_text text = {0};
    memset(&root, 0, sizeof root);
    const char *end = site ? _kj_value(_kj_space(site), &root, 0) : NULL;
    if (end && root.type == _KJ_OBJECT) _kiln_print_text(&text, &root, operands);
    else _kiln_add(&text, "kiln debug_print: cannot read the print site\n");
    if (text.failed) {
        free(text.data);
        text = (_kiln_text){0};
        _kiln_add(&text, "kiln debug_print: out of memory\n");
    }
    flockfile(stdout);
    fwrite(_kiln_str(&text), 1, text.length, stdout);
    fflush(stdout);
    funlockfile(stdout);
    free(text.data);
    _kj_free(&root);
}

/* How the glue's init binds this printer (glue_runtime.c). */
#define KILN_BIND_DEFAULT_DEBUG_PRINT() \
    _kiln_set("kiln_debug_print", (uint64_t)(uintptr_t)&_kiln_default_debug_print)
