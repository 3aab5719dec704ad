#!/bin/bash
# Writes the files docker-compose.tls.yml reads, for a local demo: a CA (tls/ca.crt, its
# key tls/ca.key), one certificate for the three servers (tls/server.crt and .key, naming
# the compose services postgres, kafka and registry, and localhost, 127.0.0.1), that
# certificate as Kafka's PKCS#12 keystore (tls/kafka/), and random passwords
# (secrets/). Needs openssl 1.1.1 or later.
#
#   deploy/make-demo-tls.sh [DIR]     DIR: where docker-compose.tls.yml is (the default)
#
# It refuses to overwrite: remove DIR/tls and DIR/secrets to start again. The files are
# mode 0644 because compose mounts them as they are and each image runs as its own user
# (docker-compose.tls.yml); the CA's key, which no container gets, is 0600. A demo CA:
# with a real one, put your own files at the same paths.
set -euo pipefail

dir="${1:-$(cd "$(dirname "$0")" && pwd)}"
tls="$dir/tls"
secrets="$dir/secrets"
for path in "$tls" "$secrets"; do
    if [ -e "$path" ]; then
        echo "$path exists: remove it (and the other of tls/, secrets/) to make new files" >&2
        exit 1
    fi
done
mkdir -p "$tls/kafka" "$secrets"

openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tls/ca.key" -subj "/CN=pgcdc demo CA" \
    -days 825 -sha256 -addext "basicConstraints = critical, CA:TRUE" \
    -addext "keyUsage = critical, keyCertSign, cRLSign" -out "$tls/ca.crt" 2>/dev/null
openssl req -new -newkey rsa:2048 -nodes -keyout "$tls/server.key" \
    -subj "/CN=pgcdc demo servers" -out "$tls/server.csr" 2>/dev/null
printf '%s\n' \
    "basicConstraints = critical, CA:FALSE" \
    "keyUsage = critical, digitalSignature, keyEncipherment" \
    "extendedKeyUsage = serverAuth" \
    "subjectAltName = DNS:postgres, DNS:kafka, DNS:registry, DNS:localhost, IP:127.0.0.1" \
    > "$tls/server.ext"
openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" \
    -CAcreateserial -CAserial "$tls/ca.srl" -days 825 -sha256 -extfile "$tls/server.ext" \
    -out "$tls/server.crt" 2>/dev/null
rm "$tls/server.csr" "$tls/server.ext"

password() { openssl rand -hex 24; }
password > "$tls/kafka/keystore-password"
openssl pkcs12 -export -in "$tls/server.crt" -inkey "$tls/server.key" -name kafka \
    -out "$tls/kafka/kafka.p12" -passout "file:$tls/kafka/keystore-password"

for name in postgres-password pgcdc-db-password kafka-sasl-password; do
    password > "$secrets/$name"
done
registry_password="$(password)"
echo "pgcdc:$registry_password" > "$secrets/registry-basic-auth"
# As deploy/local/svc_tls.py's tls-registry: basic auth, user pgcdc (role sr-admin), every
# path authenticated.
cat > "$secrets/registry-auth.properties" <<PROPERTIES
quarkus.http.auth.basic=true
quarkus.security.users.embedded.enabled=true
quarkus.security.users.embedded.plain-text=true
quarkus.security.users.embedded.users.pgcdc=$registry_password
quarkus.security.users.embedded.roles.pgcdc=sr-admin
quarkus.http.auth.permission.everything.paths=/*
quarkus.http.auth.permission.everything.policy=authenticated
PROPERTIES

find "$tls" "$secrets" -type f -exec chmod 0644 {} +
find "$tls" "$secrets" -type d -exec chmod 0755 {} +
chmod 0600 "$tls/ca.key"
echo "wrote $tls and $secrets"
