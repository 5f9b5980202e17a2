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

int hh_long_arg(const char *name, const char *value, long min, long max, long *out,
                char *err, size_t errlen)
{
    if (hh_parse_long(value, min, max, out) == 0)
        return 0;
    snprintf(err, errlen, "%s: expected an integer in %ld..%ld, got '%s'", name, min, max, value);
    return -1;
}

int hh_run_option(int c, long max_iters, long *warmup, long *iters, int *json, char *err,
                  size_t errlen)
{
    switch (c) {
    case 'h':
        return HH_PARSE_HELP;
    case 'j':
        *json = 1;
        return HH_PARSE_OK;
    case 'w':
        return hh_long_arg("--warmup", optarg, 0, max_iters, warmup, err, errlen) ? HH_PARSE_ERROR
                                                                                 : HH_PARSE_OK;
    case 'i':
        return hh_long_arg("--iters", optarg, 1, max_iters, iters, err, errlen) ? HH_PARSE_ERROR
                                                                               : HH_PARSE_OK;
    default:
        return -1;
    }
}

static const char *long_name(const struct option *longopts, int val)
{
    for (const struct option *o = longopts; o->name; o++)
        if (o->val == val)
            return o->name;
    return NULL;
}

int hh_getopt_error(int c, char **argv, const struct option *longopts, char *err,
                    size_t errlen)
{
    /* getopt_long has moved optind past the offending word; optopt is the
     * option's val when it knew the option (0 for an unknown or ambiguous
     * long one).  Options are named in full even when given abbreviated. */
    const char *word = argv[optind - 1];
    const char *name = optopt ? long_name(longopts, optopt) : NULL;
    int is_long = strncmp(word, "--", 2) == 0;

    if (c == ':' && name)
        snprintf(err, errlen, "--%s needs a value", name);
    else if (c == ':')
        snprintf(err, errlen, "%s needs a value", word);
    else if (is_long && name)
        snprintf(err, errlen, "--%s takes no value, got '%s'", name, word);
    else if (is_long)
        snprintf(err, errlen, "unknown or ambiguous option '%s'", word);
    else
        snprintf(err, errlen, "unknown option '-%c'", optopt);
    return HH_PARSE_ERROR;
}

int hh_no_operands(int argc, char **argv, char *err, size_t errlen)
{
    if (optind >= argc)
        return HH_PARSE_OK;
    snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
    return HH_PARSE_ERROR;
}

int hh_options_exit(int parse_result, int rank, const char *prog, const char *err,
                    void (*usage)(FILE *))
{
    if (parse_result == HH_PARSE_OK)
        return -1;
    if (rank == 0) {
        if (parse_result == HH_PARSE_HELP) {
            usage(stdout);
        } else {
            fprintf(stderr, "%s: %s\n", prog, err);
            usage(stderr);
        }
    }
    return parse_result == HH_PARSE_HELP ? 0 : 2;
}
