<?php
// isolab service stack `wordpress`, component `web`: the readiness check's
// answer (GET /isolab-ready): nginx reached php-fpm.
echo "ready\n";
