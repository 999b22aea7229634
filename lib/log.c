// SPDX-License-Identifier: MIT
/*
 * The verbosity flag lives in the library, not in main(), so every program
 * linking libhost (tests, fuzz targets, benchmarks) can use log_debug().
 */
#include "lib/log.h"

int opvm_verbose;
