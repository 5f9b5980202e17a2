#include "common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hh_parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    long v;

    /* strtol would accept leading blanks and a sign; a size or count never
     * has either, so only a leading digit is allowed. */
    if (s == NULL || s[0] < '0' || s[0] > '9')
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int hh_opt_value(int argc, char **argv, int *i, const char *name, const char **value)
{
    const char *arg = argv[*i];
    size_t n = strlen(name);

    if (strncmp(arg, name, n) != 0)
        return 0;
    if (arg[n] == '=') {
        *value = arg + n + 1;
        return 1;
    }
    if (arg[n] != '\0')
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *i += 1;
    *value = argv[*i];
    return 1;
}

int hh_long_option(int argc, char **argv, int *i, const char *name, long min, long max,
                   long *out, char *err, size_t errlen)
{
    const char *v;
    int r = hh_opt_value(argc, argv, i, name, &v);

    if (r == 0)
        return 0;
    if (r < 0) {
        snprintf(err, errlen, "%s needs a value", name);
        return -1;
    }
    if (hh_parse_long(v, min, max, out) != 0) {
        snprintf(err, errlen, "%s: expected an integer in %ld..%ld, got '%s'", name, min, max, v);
        return -1;
    }
    return 1;
}
