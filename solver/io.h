// io.h: forwards to the headers io.cpp was split into; include the one you use instead.
#pragma once

#include "solver/format_error.h"
#include "solver/json_printer.h"
#include "solver/profile_json.h"
#include "solver/read_file.h"
#include "solver/schedule_check.h"
#include "solver/schedule_json.h"
#include "solver/units.h"
