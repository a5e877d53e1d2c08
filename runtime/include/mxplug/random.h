/* mxplug/random.h — seeding the random number generators.
 * Part of mxplug.h; include <mxplug.h> rather than this file.
 *
 * mxplug's generator is Philox4x32-10 (Salmon et al., SC'11), counter-based:
 * every device has a 64-bit key and a counter.  An op that needs random
 * numbers reserves its counter range when it is pushed, in push order, so a
 * program gives the same numbers whatever MXP_NUM_THREADS is and however the
 * engine schedules the work.  Seeding resets the counters; it affects ops
 * pushed after it (earlier pushes already hold their ranges).
 * The default state is as after mxp_random_seed(0).  Since ABI 1.0. */
#ifndef MXPLUG_RANDOM_H
#define MXPLUG_RANDOM_H

#include <mxplug/base.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Seed every device: each gets a distinct key derived from (seed, device)
 * and counter 0.  Thread-safe. */
MXP_API void mxp_random_seed(uint64_t seed);

/* Seed one device only: its key is derived from seed alone (so the same
 * seed gives the same numbers on any device of the same kind of work), its
 * counter restarts at 0.  Returns MXP_OK. Thread-safe. */
MXP_API int mxp_random_seed_device(mxp_device dev, uint64_t seed);

#ifdef __cplusplus
}
#endif
#endif /* MXPLUG_RANDOM_H */
