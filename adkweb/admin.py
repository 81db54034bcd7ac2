"""Django's own user and group admins, with their many-to-many choices (groups, permissions) read through
adkweb.storable.StorableIdsField: Django reads such a choice's ids with pk__in, which its lookups do not
bound, and SQLite refuses an id past a bigint (OverflowError: a 500 where the field's error belongs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.db import models

from .storable import StorableIdsField

STORABLE_IDS: dict[type[models.Field], Mapping[str, Any]] = {models.ManyToManyField: {"form_class": StorableIdsField}}


class StorableUserAdmin(UserAdmin):
    formfield_overrides = {**UserAdmin.formfield_overrides, **STORABLE_IDS}


class StorableGroupAdmin(GroupAdmin):
    formfield_overrides = {**GroupAdmin.formfield_overrides, **STORABLE_IDS}


admin.site.unregister(User)
admin.site.register(User, StorableUserAdmin)
admin.site.unregister(Group)
admin.site.register(Group, StorableGroupAdmin)
