# One helper per target kind keeps every folder's CMakeLists a few lines long.
#   ocslab_library(NAME <n> [EXPORT <name>] [DEPS ...])
#       sources: <folder>/src/*.cpp; public headers: <folder>/include; headers for the build tree
#       only (the tool, tests, fuzzers): <folder>/internal. EXPORT: installed in the libocs-dev
#       component with its include/ headers, as ocslab::<name> of find_package(ocslab)
#       (docs/install.md)
#   ocslab_executable(NAME <n> SOURCES ... [DEPS ...] [INSTALL <component>])
#       INSTALL: installed to bin/ in that package component (ocslab, ocslab-agent)
#   ocslab_test(NAME <n> GLOB <dir> [DEPS ...] [LABELS ...])  one Catch2 binary over <dir>/*.cpp
#   ocslab_fuzzer(NAME <n> SOURCES ... [DEPS ...])            libFuzzer target (OCSLAB_FUZZ=ON)
#   ocslab_bench(NAME <n> SOURCES ... [DEPS ...])
#   ocslab_cli_docs(TARGET <program> SECTION <n>)             man page + bash completion from --help

include(GNUInstallDirs)

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

# Test code (the Catch2 binaries and their main) is compiled for compile time. The release build:
# -O1, which keeps g++'s flow-based warnings (which -O0 turns off) at 60 % of -O2's compile time.
# The instrumented build (clang, whose warnings do not depend on the optimiser): -O0, 43 % less
# compile time for test code, except the binaries whose own code does the heavy work
# (OCSLAB_INSTRUMENTED_O1_TESTS): at -O0 under ASan the agent session test's byte stream fell
# behind the 8 kHz sample stream it reads and the control-plane fuzzed-streams case failed with
# it; the forwarding and collbench tests ran 17 s and 5 s longer for 6 s and 0.3 s less compile
# time. The libraries and programs the tests call keep the build's -O1. Other configurations
# (Debug) keep their own flags. docs/testing.md has the figures.
set(OCSLAB_INSTRUMENTED_O1_TESTS unit_agent integration_emulator_cp integration_forwarding integration_collbench)
function(ocslab_test_code target)
  target_compile_options(${target} PRIVATE $<$<CONFIG:RelWithDebInfo,Release>:-O1>)
  if(NOT target IN_LIST OCSLAB_INSTRUMENTED_O1_TESTS)
    target_compile_options(${target} PRIVATE $<$<CONFIG:Instrumented>:-O0>)
  endif()
endfunction()

function(ocslab_library)
  cmake_parse_arguments(A "" "NAME;EXPORT" "DEPS" ${ARGN})
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/*.cpp)
  add_library(${A_NAME} STATIC ${_srcs})
  target_include_directories(${A_NAME} PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>)
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/internal)
    target_include_directories(${A_NAME} PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/internal>)
  endif()
  target_link_libraries(${A_NAME} PUBLIC ${A_DEPS})
  _ocslab_common(${A_NAME})
  if(A_EXPORT)
    # The export set of cmake/ocslabConfig.cmake.in and the link order of ocslab.pc.in.
    set_target_properties(${A_NAME} PROPERTIES EXPORT_NAME ${A_EXPORT})
    target_include_directories(${A_NAME} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    install(TARGETS ${A_NAME} EXPORT ocslabTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT libocs-dev)
    install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
            COMPONENT libocs-dev)
  endif()
endfunction()

function(ocslab_executable)
  cmake_parse_arguments(A "" "NAME;INSTALL" "SOURCES;DEPS" ${ARGN})
  add_executable(${A_NAME} ${A_SOURCES})
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS})
  set_target_properties(${A_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
  _ocslab_common(${A_NAME})
  if(A_INSTALL)
    install(TARGETS ${A_NAME} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ${A_INSTALL})
  endif()
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

# A program's man page and bash completion, made from its own --help (and every command's) by
# scripts/cli-docs after each link of the program, as part of `all`: OCSLAB_MAN_DIR/<program>.<n>
# and OCSLAB_COMPLETION_DIR/<program>. The global properties OCSLAB_MAN_PAGES and
# OCSLAB_COMPLETIONS list the files for the install rules; OCSLAB_CLI_DOCS lists program:section
# for the lint test that checks them (docs/cli.md).
set(OCSLAB_MAN_DIR ${CMAKE_BINARY_DIR}/man)
set(OCSLAB_COMPLETION_DIR ${CMAKE_BINARY_DIR}/completion)
# scripts/cli-docs is Python: a build without python3 (an agent-only build on a minimal host) skips
# the pages and says so.
find_program(OCSLAB_PYTHON3 python3)
function(ocslab_cli_docs)
  cmake_parse_arguments(A "" "TARGET;SECTION" "" ${ARGN})
  if(NOT OCSLAB_PYTHON3)
    message(STATUS "python3 not found: no man page or bash completion for ${A_TARGET}")
    return()
  endif()
  set(_page ${OCSLAB_MAN_DIR}/${A_TARGET}.${A_SECTION})
  set(_completion ${OCSLAB_COMPLETION_DIR}/${A_TARGET})
  # The page is also written gzipped (-n: no name or time stamp, so the package is reproducible),
  # the form Debian installs man pages in.
  add_custom_command(OUTPUT ${_page} ${_page}.gz ${_completion}
    COMMAND ${OCSLAB_PYTHON3} ${CMAKE_SOURCE_DIR}/scripts/cli-docs generate $<TARGET_FILE:${A_TARGET}> ${A_SECTION} ${OCSLAB_MAN_DIR}
            ${OCSLAB_COMPLETION_DIR}
    COMMAND gzip -9 -n -k -f ${_page}
    DEPENDS ${A_TARGET} ${CMAKE_SOURCE_DIR}/scripts/cli-docs
    COMMENT "Man page and bash completion of ${A_TARGET}" VERBATIM)
  add_custom_target(cli-docs-${A_TARGET} ALL DEPENDS ${_page} ${_page}.gz ${_completion})
  set_property(GLOBAL APPEND PROPERTY OCSLAB_CLI_DOCS ${A_TARGET}:${A_SECTION})
  set_property(GLOBAL APPEND PROPERTY OCSLAB_MAN_PAGES ${_page})
  set_property(GLOBAL APPEND PROPERTY OCSLAB_COMPLETIONS ${_completion})
endfunction()
