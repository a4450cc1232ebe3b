# One helper per target kind keeps every folder's CMakeLists a few lines long.
#   ocslab_library(NAME <n> [DEPS ...])        sources: <folder>/src/*.cpp, headers: <folder>/include
#   ocslab_executable(NAME <n> SOURCES ... [DEPS ...])
#   ocslab_test(NAME <n> GLOB <dir> [DEPS ...] [LABELS ...])  one Catch2 binary over <dir>/*.cpp
#   ocslab_fuzzer(NAME <n> SOURCES ... [DEPS ...])            libFuzzer target (OCSLAB_FUZZ=ON)
#   ocslab_bench(NAME <n> SOURCES ... [DEPS ...])

set(OCSLAB_WARNINGS -Wall -Wextra)
if(OCSLAB_WERROR)
  list(APPEND OCSLAB_WARNINGS -Werror)
endif()

function(_ocslab_common target)
  target_compile_options(${target} PRIVATE ${OCSLAB_WARNINGS})
  # One instrumented build serves both the sanitizer tests and the fuzz targets (CI builds the
  # tree twice, not three times): every object carries ASan + UBSan, and with OCSLAB_FUZZ also
  # libFuzzer's coverage instrumentation (fuzzer-no-link). Only the fuzz targets link libFuzzer
  # itself (ocslab_fuzzer); the test binaries link the sanitizer runtimes, which define the
  # coverage callbacks as no-ops.
  if(OCSLAB_SANITIZE OR OCSLAB_FUZZ)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
                                             -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
  if(OCSLAB_FUZZ)
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
  endif()
endfunction()

# Test code (the Catch2 binaries and their main) is compiled for compile time in the release
# build: -O1 keeps g++'s flow-based warnings (which -O0 turns off) at 60 % of -O2's compile time.
# The instrumented build keeps its -O1: at -O0 under ASan, test code that moves data itself (the
# agent session test's byte stream) fell behind the 8 kHz sample stream it reads. Other
# configurations (Debug) keep their own flags. docs/testing.md has the figures.
function(ocslab_test_code target)
  target_compile_options(${target} PRIVATE $<$<CONFIG:RelWithDebInfo,Release>:-O1>)
endfunction()

function(ocslab_library)
  cmake_parse_arguments(A "" "NAME" "DEPS" ${ARGN})
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/*.cpp)
  add_library(${A_NAME} STATIC ${_srcs})
  target_include_directories(${A_NAME} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
  target_link_libraries(${A_NAME} PUBLIC ${A_DEPS})
  _ocslab_common(${A_NAME})
endfunction()

function(ocslab_executable)
  cmake_parse_arguments(A "" "NAME" "SOURCES;DEPS" ${ARGN})
  add_executable(${A_NAME} ${A_SOURCES})
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS})
  set_target_properties(${A_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
  _ocslab_common(${A_NAME})
  # The tests run these (bin_path()), so the instrumented build makes them all.
  set_property(GLOBAL APPEND PROPERTY OCSLAB_INSTRUMENTED_TESTS ${A_NAME})
endfunction()

# Every ctest entry carries one label: unit (the default here), integration, vlab or lint.
# Entries not labelled vlab are what the instrumented build runs (target `instrumented`).
function(ocslab_test)
  cmake_parse_arguments(A "" "NAME;GLOB" "DEPS;LABELS;ARGS" ${ARGN})
  if(NOT A_LABELS)
    set(A_LABELS unit)
  endif()
  if(NOT "vlab" IN_LIST A_LABELS)
    set_property(GLOBAL APPEND PROPERTY OCSLAB_INSTRUMENTED_TESTS ${A_NAME})
  endif()
  file(GLOB _srcs CONFIGURE_DEPENDS ${A_GLOB}/*.cpp)
  add_executable(${A_NAME} ${_srcs})
  target_link_libraries(${A_NAME} PRIVATE ocslab_catch_main ${A_DEPS})
  set_target_properties(${A_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  _ocslab_common(${A_NAME})
  ocslab_test_code(${A_NAME})
  add_test(NAME ${A_NAME} COMMAND ${A_NAME} ${A_ARGS})
  set_tests_properties(${A_NAME} PROPERTIES
    LABELS "${A_LABELS}"
    ENVIRONMENT "OCSLAB_BIN_DIR=${CMAKE_BINARY_DIR}/bin;OCSLAB_TEST_BIN_DIR=${CMAKE_BINARY_DIR}/tests;OCSLAB_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endfunction()

function(ocslab_fuzzer)
  cmake_parse_arguments(A "" "NAME" "SOURCES;DEPS" ${ARGN})
  if(NOT OCSLAB_FUZZ)
    return()
  endif()
  add_executable(${A_NAME} ${A_SOURCES})
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS})
  target_link_options(${A_NAME} PRIVATE -fsanitize=fuzzer)
  set_target_properties(${A_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
  _ocslab_common(${A_NAME})
endfunction()

function(ocslab_bench)
  cmake_parse_arguments(A "" "NAME" "SOURCES;DEPS" ${ARGN})
  add_executable(${A_NAME} ${A_SOURCES})
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS})
  set_target_properties(${A_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
  _ocslab_common(${A_NAME})
endfunction()
