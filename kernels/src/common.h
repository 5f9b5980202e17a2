/* Command-line helpers shared by the kernels. */
#ifndef HPC_HEALTH_KERNELS_COMMON_H
#define HPC_HEALTH_KERNELS_COMMON_H

#include <stddef.h>

/* Parse a whole string as a decimal integer in [min, max].  Signs, blanks and
 * trailing characters are rejected so that "-8", " 8" and "8k" are errors
 * rather than silently meaning something else.  Returns 0 on success. */
int hh_parse_long(const char *s, long min, long max, long *out);

/* If argv[*i] is the option `name`, given as "name VALUE" or "name=VALUE",
 * set *value (advancing *i past a separate value) and return 1.  Return 0 if
 * argv[*i] is another option, -1 if the value is missing. */
int hh_opt_value(int argc, char **argv, int *i, const char *name, const char **value);

/* hh_opt_value followed by hh_parse_long.  Returns 0 if argv[*i] is another
 * option, 1 if *out was set, -1 after writing a message into err. */
int hh_long_option(int argc, char **argv, int *i, const char *name, long min, long max,
                   long *out, char *err, size_t errlen);

#endif
