# Debian packages by CPack (`cpack -G DEB` in the build directory, or scripts/package.sh):
#   proctor         proctord and the proctor CLI (stripped) and the certificate tool
#                   proctor-certs with their manual pages, the systemd unit proctord@.service
#                   (instance = node name, settings in /etc/proctor/NAME.toml, journal in
#                   /var/lib/proctor/NAME, user proctor), an example settings file, the
#                   manual (docs/, with proto/WIRE.md and examples/http/ that it links to);
#   libproctor-dev  the headers, static libraries and CMake package procedure authors build
#                   their own nodes with (find_package(Proctor)).
# Dependencies on Debian's shared libraries come from dpkg-shlibdeps.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME proctor)
set(CPACK_PACKAGE_VENDOR "The Proctor authors")
set(CPACK_PACKAGE_CONTACT "Proctor maintainers <maintainers@users.noreply.a-seed-da1bc2fc.example>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "durable procedure engine built on actors")
set(CPACK_COMPONENT_DEV_DESCRIPTION "durable procedure engine built on actors - development files")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL server dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://example.invalid/proctor")

set(CPACK_DEBIAN_SERVER_PACKAGE_NAME proctor)
# tzdata: schedules' named time zones are read from /usr/share/zoneinfo (libdate-tz3 itself
# comes from dpkg-shlibdeps).
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "adduser, tzdata")
# openssl: the command proctor-certs runs; the daemon and the CLI need only libssl (shlibdeps).
set(CPACK_DEBIAN_SERVER_PACKAGE_RECOMMENDS "openssl")
# CPack puts the summary above as the synopsis; these lines are the extended description
# (an empty line is a paragraph break).
set(CPACK_DEBIAN_SERVER_DESCRIPTION "Proctor runs each procedure (a change to a system made in many small
steps) as an actor whose every step is journaled in RocksDB before it
acts, and carries it on after a crash: forward to success, or backward,
undoing every committed step in reverse order. Trees of procedures may
span nodes; a node may be a group of replicas kept by Raft.

This package has the node daemon proctord, the operator CLI proctor, a
systemd unit, proctord@NAME, and proctor-certs, which makes a cluster's
certificate authority and issues its TLS certificates.")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/cmake/deb/postinst ${PROJECT_SOURCE_DIR}/cmake/deb/prerm
  ${PROJECT_SOURCE_DIR}/cmake/deb/postrm)
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libproctor-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
  "libcaf-dev, libcaf-openssl0.17, librocksdb-dev, libprotobuf-dev, libspdlog-dev, libssl-dev, libraft-dev, libuv1-dev, liblz4-dev, prometheus-cpp-dev, libsimdjson-dev, nlohmann-json3-dev, libcpp-httplib-dev, libjemalloc-dev, libhowardhinnant-date-dev, tzdata")
set(CPACK_DEBIAN_DEV_DESCRIPTION "Proctor runs each procedure (a change to a system made in many small
steps) as an actor whose every step is journaled before it acts, and
carries it on after a crash.

This package has the headers, static libraries and CMake package
(find_package(Proctor)) to build a node with procedures of one's own,
and the crash harness to test them.")

# Files only the packages carry: the unit, an example settings file, the manual (docs/),
# and what Debian asks of every package's documentation directory.
set(PROCTOR_DEB_DOC share/doc/proctor)
install(FILES ${PROJECT_SOURCE_DIR}/cmake/deb/proctord@.service
  DESTINATION lib/systemd/system COMPONENT server EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/cmake/deb/node.toml
  DESTINATION ${PROCTOR_DEB_DOC}/examples COMPONENT server EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/cmake/deb/copyright
  DESTINATION ${PROCTOR_DEB_DOC} COMPONENT server EXCLUDE_FROM_ALL)
# The whole manual, laid out as in the source tree so that its links between pages, to
# proto/WIRE.md and to examples/http/ hold in the package (scripts/package.sh checks them).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/
  DESTINATION ${PROCTOR_DEB_DOC}/docs COMPONENT server EXCLUDE_FROM_ALL
  FILES_MATCHING PATTERN "*.md" PATTERN "*.json")
install(FILES ${PROJECT_SOURCE_DIR}/proto/WIRE.md ${PROJECT_SOURCE_DIR}/proto/JOURNAL.md
  DESTINATION ${PROCTOR_DEB_DOC}/proto COMPONENT server EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/examples/http/README.md
  ${PROJECT_SOURCE_DIR}/examples/http/proctor_http.py ${PROJECT_SOURCE_DIR}/examples/http/proctor_http.sh
  DESTINATION ${PROCTOR_DEB_DOC}/examples/http COMPONENT server EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/cmake/deb/copyright
  DESTINATION share/doc/libproctor-dev COMPONENT dev EXCLUDE_FROM_ALL)
foreach(pkg proctor libproctor-dev)
  set(changelog ${PROJECT_BINARY_DIR}/deb/${pkg}/changelog.gz)
  add_custom_command(OUTPUT ${changelog}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/deb/${pkg}
    COMMAND gzip -9n -c ${PROJECT_SOURCE_DIR}/cmake/deb/changelog > ${changelog}
    DEPENDS ${PROJECT_SOURCE_DIR}/cmake/deb/changelog)
  list(APPEND PROCTOR_DEB_GZIPPED ${changelog})
endforeach()
# The manual pages, compressed as Debian wants them.
foreach(page proctord.1 proctor.1 proctor-certs.1)
  set(gz ${PROJECT_BINARY_DIR}/deb/man/${page}.gz)
  add_custom_command(OUTPUT ${gz}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/deb/man
    COMMAND gzip -9n -c ${PROJECT_SOURCE_DIR}/cmake/deb/${page} > ${gz}
    DEPENDS ${PROJECT_SOURCE_DIR}/cmake/deb/${page})
  list(APPEND PROCTOR_DEB_GZIPPED ${gz})
  install(FILES ${gz} DESTINATION share/man/man1 COMPONENT server EXCLUDE_FROM_ALL)
endforeach()
add_custom_target(deb_gzipped ALL DEPENDS ${PROCTOR_DEB_GZIPPED})
install(FILES ${PROJECT_BINARY_DIR}/deb/proctor/changelog.gz
  DESTINATION ${PROCTOR_DEB_DOC} COMPONENT server EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_BINARY_DIR}/deb/libproctor-dev/changelog.gz
  DESTINATION share/doc/libproctor-dev COMPONENT dev EXCLUDE_FROM_ALL)

include(CPack)
