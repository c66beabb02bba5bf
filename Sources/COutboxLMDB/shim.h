#ifndef COUTBOXLMDB_SHIM_H
#define COUTBOXLMDB_SHIM_H
#include <lmdb.h>
#endif
