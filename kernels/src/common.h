/* Command-line helpers shared by the kernels. */
#ifndef HPC_HEALTH_KERNELS_COMMON_H
#define HPC_HEALTH_KERNELS_COMMON_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

/* What parsing the options decided. */
enum { HH_PARSE_OK, HH_PARSE_HELP, HH_PARSE_ERROR };

/* getopt_long's option string for the kernels: stop at the first non-option
 * (it is an error, reported by hh_no_operands), report a missing value as
 * ':' so that it gets its own message, and take -h for --help. */
#define HH_OPTSTRING "+:h"

/* Parse a whole string as a decimal integer in [min, max].  Signs, blanks and
 * trailing characters are rejected so that "-8", " 8" and "8k" are errors
 * rather than silently meaning something else.  Returns 0 on success. */
int hh_parse_long(const char *s, long min, long max, long *out);

/* hh_parse_long for the value of option `name`; -1 after writing a message
 * naming the option into err. */
int hh_long_arg(const char *name, const char *value, long min, long max, long *out,
                char *err, size_t errlen);

/* The options every kernel takes, by their getopt_long val: 'h' --help,
 * 'j' --json, 'w' --warmup N (0..max_iters), 'i' --iters N (1..max_iters).
 * Returns HH_PARSE_OK after storing one, HH_PARSE_HELP, HH_PARSE_ERROR with a
 * message in err, or -1 if c is none of them. */
int hh_run_option(int c, long max_iters, long *warmup, long *iters, int *json, char *err,
                  size_t errlen);

/* The message for getopt_long's '?' (unknown or ambiguous option) or ':'
 * (missing value) result `c`, just returned for argv; HH_PARSE_ERROR. */
int hh_getopt_error(int c, char **argv, const struct option *longopts, char *err,
                    size_t errlen);

/* After the getopt_long loop: HH_PARSE_ERROR with a message if operands are
 * left (the kernels take none), else HH_PARSE_OK. */
int hh_no_operands(int argc, char **argv, char *err, size_t errlen);

/* What main does with a parse result: -1 to go on; otherwise rank 0 has
 * printed the usage (on stdout for --help, after `prog: err` on stderr for an
 * error) and this is the exit status, 0 or 2, for after MPI_Finalize.  Every
 * rank parses the same argv, so all of them agree without communicating. */
int hh_options_exit(int parse_result, int rank, const char *prog, const char *err,
                    void (*usage)(FILE *));

#endif
