# Sourced by the Elasticsearch scripts after lib-services.sh: the distribution they all run.
# Maven Central's integ-test-zip of Elasticsearch 8.19.21 (no bundled JDK, sha256 pinned), run on
# Temurin 25 (ES_JAVA_HOME).

es_version=8.19.21
es_zip_url=https://repo1.maven.org/maven2/org/elasticsearch/distribution/integ-test-zip/elasticsearch/$es_version/elasticsearch-$es_version.zip
es_zip_sha256=215d5f3dbf0609a149f6218a9e47b6ae2df34ebbff3c5754e35f15a5e5393c8a
install=$kb_cache/elasticsearch-$es_version
java_home=${ES_JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}

# Downloads (checksum verified) and unpacks the distribution into the cache once, owned by the
# service user, and checks that the user can run it and the JDK.
install_elasticsearch() {
  [ -x "$java_home/bin/java" ] || die "no JDK at $java_home: set ES_JAVA_HOME"
  local zip=$kb_cache/downloads/elasticsearch-$es_version.zip
  if [ ! -x "$install/bin/elasticsearch" ]; then
    fetch_checked "$es_zip_url" "$zip" "$es_zip_sha256"
    log "unpacking $(basename "$zip")"
    rm -rf "$install.tmp"
    mkdir -p "$install.tmp"
    unzip -q "$zip" -d "$install.tmp"
    [ -x "$install.tmp/elasticsearch-$es_version/bin/elasticsearch" ] || die "unexpected layout in $zip"
    chown -R "$kb_user": "$install.tmp"
    rm -rf "$install"
    mv "$install.tmp/elasticsearch-$es_version" "$install"
    rmdir "$install.tmp"
  fi
  check_user_can_exec "$install/bin/elasticsearch"
  check_user_can_exec "$java_home/bin/java"
}

# The Elasticsearch JVM whose tmpdir is DIR/tmp (each instance has its own), when one runs.
elasticsearch_pid_in() {
  local dir
  for dir in /proc/[0-9]*; do
    # (A process may end between the listing and the read: no message for that.)
    if { tr '\0' ' ' <"$dir/cmdline"; } 2>/dev/null | grep -q "org.elasticsearch.*-Djava.io.tmpdir=$1/tmp "; then
      echo "${dir#/proc/}"
      return 0
    fi
  done
  return 1
}
