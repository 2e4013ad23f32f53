// Bindings of the part writer (io/parquet_part.hpp, io/codecs.hpp), added to
// the module by module.cpp: encode_part, crc32, snappy_compress.
#pragma once

#include <pybind11/pybind11.h>

void bind_part(pybind11::module_& mod);
