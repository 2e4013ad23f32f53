// Bindings of csrc/io/ (the dataset runs' file work), added to the module by
// module.cpp: encode_part, crc32, snappy_compress (io/parquet_part.hpp,
// io/codecs.hpp) and repeated_ids (io/task_ids.hpp).
#pragma once

#include <pybind11/pybind11.h>

void bind_part(pybind11::module_& mod);
