// Bindings of the binned surrogate (binned_bind.cpp), added to the module by
// module.cpp: surrogate_loo_auc_binned, aces_o_fit_binned, binned_error_bound,
// binned_grid_spacing.
#pragma once

#include <pybind11/pybind11.h>

void bind_binned(pybind11::module_& mod);
