/* env.h — reading MXP_* environment variables (env.c).  Every variable is
 * parsed by one of these: a value that does not parse, or lies outside its
 * range, is reported with a warning naming the variable, the value and what
 * is used instead (once per variable and value), never ignored silently. */
#ifndef MXP_BASE_ENV_H
#define MXP_BASE_ENV_H

/* Integer in [lo, hi]; unset or empty: dflt. */
long mxp__env_int(const char *name, long lo, long hi, long dflt);

/* Boolean: 1/true/yes/on or 0/false/no/off (any case); unset or empty: dflt. */
int mxp__env_bool(const char *name, int dflt);

#endif /* MXP_BASE_ENV_H */
