#!/bin/sh
# Writes the three env files this overlay's secretGenerator reads (memento.env, migrate.env, postgres.env) with
# fresh random passwords and keys, consistent with each other: the services' DSN, the owner's DSN, the PostgreSQL
# superuser and Redis all agree. Git ignores the files. To rotate, delete all three, run again, re-apply; note that
# PostgreSQL keeps the owner password its volume was first initialised with.
set -eu
cd "$(dirname "$0")"

files="memento.env migrate.env postgres.env"
present=0
for f in $files; do [ -e "$f" ] && present=$((present + 1)); done
if [ "$present" -eq 3 ]; then
    echo "make-secrets: $files exist already; nothing to do" >&2
    exit 0
elif [ "$present" -ne 0 ]; then
    echo "make-secrets: only some of $files exist; delete them all and run again" >&2
    exit 1
fi

rand() { od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; }
owner=$(rand)
umask 077

cat > postgres.env <<END
POSTGRES_USER=memento
POSTGRES_PASSWORD=$owner
POSTGRES_DB=memento
END

cat > migrate.env <<END
MIGRATION_DATABASE_URL=postgresql://memento:$owner@postgres:5432/memento
END

cat > memento.env <<END
DATABASE_URL=postgresql://memento_app:$(rand)@postgres:5432/memento
REDIS_PASSWORD=$(rand)
MEMENTO_ACCESS_KEY=$(rand)
MEMENTO_INTERNAL_SECRET=$(rand)
OPENAI_API_KEY=
GEMINI_API_KEY=
END

echo "make-secrets: wrote $files" >&2
